"""``python -m plansim`` and the ``plansim`` executable: ``plansim.cli.run``, with the command's
modules imported without cyclic garbage collection (``plansim.runtime.long_lived``: they live
until the process ends, and collecting among them while typer and pydantic load cost ~3 ms)."""

from plansim.runtime import long_lived


def main() -> None:
    with long_lived():
        from plansim.cli import run
    run()


if __name__ == "__main__":
    main()
