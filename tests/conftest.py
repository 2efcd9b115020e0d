"""Make the collection importable as ansible_collections.hybridhpc.slurm.

The repository root is the collection root; a symlink under .collections/
gives it the path Ansible's loader and `from ansible_collections...`
imports expect, without copying the tree. tests/ itself goes on the path
too, for the shared fakes (``from fakes.slurmrestd import FakeSlurmrestd``)
and the other helpers there.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
COLLECTIONS = ROOT / ".collections"
LINK = COLLECTIONS / "ansible_collections" / "hybridhpc" / "slurm"

if not LINK.exists():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    LINK.symlink_to(ROOT, target_is_directory=True)
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

# Ansible's own collection loader, as ansible-test installs it for unit tests:
# templates rendered in tests can then use the collection's plugins by FQCN.
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder  # noqa: E402

_AnsibleCollectionFinder(paths=[str(COLLECTIONS)])._install()
