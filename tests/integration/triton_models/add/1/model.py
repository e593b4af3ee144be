"""Test model: OUTPUT0 = 2 * INPUT0 + 1, one execute() per batch Triton forms."""
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        # A little compute time per batch: under concurrent load requests wait in
        # the dynamic batcher's queue and are executed together.
        time.sleep(0.02)
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x * 2 + 1).astype(np.float32))]))
        return out
