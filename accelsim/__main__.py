"""``python -m accelsim``: the same as the ``accelsim`` command."""

from accelsim.cli import entry

entry()
