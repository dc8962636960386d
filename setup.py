"""Build step that ships the checkout's ``arch_configs/`` and ``workloads/`` inside the package.

The project keeps those folders at the top of the repository (where users read and edit them);
an installed package needs them too, so that shipped names (``h100-sxm``, ``resnet50``) resolve
from any folder. ``build_py`` copies every file of :data:`accelsim.paths.SHIPPED` into
``accelsim/data/<folder>/`` of the wheel; :mod:`accelsim.paths` looks there. Everything else is
configured in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: same tuple as accelsim.paths.SHIPPED (not imported: the build must not import the package)
SHIPPED = ("workloads", "arch_configs")


def shipped_sources() -> list[Path]:
    """Regular, non-hidden files of the shipped folders, relative to the checkout."""
    return sorted(f.relative_to(ROOT) for folder in SHIPPED for f in (ROOT / folder).iterdir()
                  if f.is_file() and not f.name.startswith("."))


class BuildPyWithShippedData(build_py):
    """``build_py`` plus the copy of the shipped folders into ``accelsim/data/``."""

    def run(self) -> None:
        super().run()
        for rel in shipped_sources():
            target = Path(self.build_lib, "accelsim", "data", rel)
            self.mkpath(str(target.parent))
            self.copy_file(str(ROOT / rel), str(target))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode),
                *(str(Path(self.build_lib, "accelsim", "data", rel)) for rel in shipped_sources())]


setup(cmdclass={"build_py": BuildPyWithShippedData})
