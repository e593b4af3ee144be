"""The audit suite runs through `invoke audit`, which gives each test its `target`."""
