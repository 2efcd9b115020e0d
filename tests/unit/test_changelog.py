"""Release hygiene: galaxy.yml's version and the changelog tell the same story.

changelogs/changelog.yaml lists released versions; changelogs/fragments/ holds
one fragment per change since the last release (antsibull-changelog). The
version in galaxy.yml is either the last release (nothing pending) or the next
one (its changes are the pending fragments); never older, never a release
without what it changed.
"""

import pathlib

import yaml
from ansible.module_utils.compat.version import LooseVersion

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHANGELOG = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())
CONFIG = yaml.safe_load((ROOT / "changelogs" / "config.yaml").read_text())
VERSION = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
FRAGMENTS = sorted(p for p in (ROOT / "changelogs" / "fragments").iterdir() if p.suffix in (".yml", ".yaml"))


def test_galaxy_version_is_the_last_release_or_the_next_with_its_fragments():
    released = sorted(CHANGELOG["releases"], key=LooseVersion)
    last = released[-1]
    assert LooseVersion(VERSION) >= LooseVersion(last), "galaxy.yml version %s is older than the released %s" % (VERSION, last)
    if VERSION == last:
        assert not FRAGMENTS, "fragments %s are pending but galaxy.yml still says the released %s: bump it" % (
            [p.name for p in FRAGMENTS], VERSION)
    else:
        assert FRAGMENTS, "galaxy.yml says %s, after the released %s, but no fragment says what changed" % (VERSION, last)


def test_every_fragment_uses_a_known_section():
    sections = {name for name, _title in CONFIG["sections"]} | {CONFIG["prelude_section_name"]}
    for path in FRAGMENTS:
        data = yaml.safe_load(path.read_text())
        assert isinstance(data, dict) and data, path.name
        unknown = set(data) - sections
        assert not unknown, "%s: unknown sections %s" % (path.name, unknown)
        for section, entries in data.items():
            if section != CONFIG["prelude_section_name"]:
                assert isinstance(entries, list) and all(isinstance(e, str) and e.strip() for e in entries), path.name
