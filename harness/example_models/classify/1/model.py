"""The sandbox's example model (Python backend, CPU): a tiny linear classifier.

INPUT0 is one FP32 vector of 64 features per item, OUTPUT0 the 8 class scores of
``W @ x`` with fixed weights.  Each execute() of a batch costs a fixed 4 ms plus
a little per item, like a model whose kernel launch dominates at small
batches: under concurrent load Triton's dynamic batcher groups requests, and
``invoke bench`` shows the batches it formed beside the client's latencies.
"""
import time

import numpy as np
import triton_python_backend_utils as pb_utils

W = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)


class TritonPythonModel:
    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        items = sum(x.shape[0] for x in xs)
        time.sleep(0.004 + 0.0002 * items)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x @ W.T).astype(np.float32))])
                for x in xs]
