"""Test model that cannot load: the rollback test deploys it."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file is corrupt (test model that never loads)")

    def execute(self, requests):
        return []
