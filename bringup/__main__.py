"""``python3 -m bringup ...``: the ``bringup`` command, for a machine where the console script is not on PATH."""
from .entry import main

if __name__ == "__main__":
    main()
