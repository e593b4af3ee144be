"""The benchmark's own project: one role, ``mix``, the six-operation mix of issue 11."""

ORDER = ["mix"]
