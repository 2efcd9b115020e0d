# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's controller-side plugins use ansible-core's public plugin interfaces only.

Each ansible-core release changed the internals the collection's old speed
layer reached into (the strategy's queue, TaskExecutor, Templar's Jinja
environment, the plugin loaders, the garbage collector): 2.19 broke three of
them, and Mitogen refuses private ActionBase methods. The scan below reads
every file under plugins/ and names each line that leaves the public surface.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The plugin types of ansible-core's documented interfaces the collection ships.
PLUGIN_TYPES = {"action", "callback", "doc_fragments", "filter", "lookup", "module_utils", "modules", "plugin_utils",
                "test"}
# What controller-side plugin code may import from ansible: the base classes
# it extends (their packages, not the builtin plugins beside them), display,
# the release, and errors and module_utils with what is under them.
PUBLIC_MODULES = {"ansible.plugins.action", "ansible.plugins.callback", "ansible.plugins.lookup",
                  "ansible.plugins.filter", "ansible.plugins.test", "ansible.utils.display", "ansible.release"}
PUBLIC_PACKAGES = ("ansible.errors", "ansible.module_utils")
# ActionBase's and LookupBase's public surface: what ansible-core hands a plugin (its task, templar, loader,
# connection and play context) and the module runner every collection's action plugins call.
PUBLIC_SELF = {"_task", "_templar", "_loader", "_connection", "_play_context", "_execute_module", "_display"}
FORBIDDEN_CALLS = {("gc", "freeze"), ("gc", "disable")}


def _imported(node):
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module]
    return []


def _own_names(tree):
    """Names a plugin file's classes define themselves (methods and class attributes): ``self._x`` on those is
    the plugin's own business."""
    names = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.Assign):
                names.update(target.id for target in item.targets if isinstance(target, ast.Name))
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id == "self"):
                        names.add(target.attr)
    return names


def problems(root):
    """``["path:line: what"]`` for every use of ansible-core beyond its public plugin interfaces under root/plugins."""
    found = []
    plugins = root / "plugins"
    for kind in sorted(path.name for path in plugins.iterdir() if path.is_dir() and path.name != "__pycache__"):
        if kind not in PLUGIN_TYPES:
            found.append("plugins/%s: not a plugin type the collection may ship" % kind)
    for path in sorted(plugins.rglob("*.py")):
        relative = path.relative_to(root)
        kind = relative.parts[1]
        tree = ast.parse(path.read_text(), str(path))
        controller_side = kind not in ("modules", "module_utils", "doc_fragments")
        own = _own_names(tree)
        for node in ast.walk(tree):
            for name in _imported(node):
                if name == "gc":
                    found.append("%s:%d: imports gc" % (relative, node.lineno))
                if not (name == "ansible" or name.startswith("ansible.")):
                    continue
                if kind in ("modules", "module_utils"):
                    if not name.startswith("ansible.module_utils."):
                        found.append("%s:%d: imports %s (modules run on the host: module_utils only)"
                                     % (relative, node.lineno, name))
                elif not (name in PUBLIC_MODULES or name in PUBLIC_PACKAGES or name.startswith(
                        tuple(package + "." for package in PUBLIC_PACKAGES))):
                    found.append("%s:%d: imports %s" % (relative, node.lineno, name))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                if (node.func.value.id, node.func.attr) in FORBIDDEN_CALLS:
                    found.append("%s:%d: calls %s.%s" % (relative, node.lineno, node.func.value.id, node.func.attr))
            if (controller_side and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "self" and node.attr.startswith("_") and not node.attr.startswith("__")
                    and node.attr not in PUBLIC_SELF and node.attr not in own):
                found.append("%s:%d: self.%s is not on the plugin base class's public surface"
                             % (relative, node.lineno, node.attr))
    return found


def test_plugins_use_only_the_public_plugin_interfaces():
    assert problems(ROOT) == []


def test_the_scan_names_what_the_old_speed_layer_did(tmp_path):
    """Each kind of line the speed layer had (a strategy, TaskExecutor, a Templar subclass's environment, the
    plugin loaders, gc.freeze, private ActionBase methods) is named."""
    plugins = tmp_path / "plugins"
    for kind in ("strategy", "action", "callback", "lookup", "modules"):
        (plugins / kind).mkdir(parents=True)
    (plugins / "strategy" / "linear.py").write_text("from ansible.plugins.strategy.linear import StrategyModule\n")
    (plugins / "callback" / "preload.py").write_text(
        "import gc\nfrom ansible.plugins.loader import filter_loader\nfrom ansible.template import Templar\n"
        "gc.freeze()\n")
    (plugins / "lookup" / "template.py").write_text(
        "from ansible.plugins.lookup.template import LookupModule as TemplateLookup\n")
    (plugins / "action" / "facts.py").write_text(
        "from ansible.executor.task_executor import TaskExecutor\n"
        "from ansible.plugins.action import ActionBase\n"
        "class ActionModule(ActionBase):\n"
        "    _VALID_ARGS = frozenset()\n"
        "    def run(self, tmp=None, task_vars=None):\n"
        "        self._own = 1\n"
        "        self._low_level_execute_command('true')\n"
        "        return self._execute_module(module_name='x', task_vars=self._own and task_vars)\n")
    (plugins / "modules" / "m.py").write_text("from ansible.module_utils.basic import AnsibleModule\n"
                                              "from ansible.parsing.dataloader import DataLoader\n")
    found = problems(tmp_path)
    assert found == [
        "plugins/strategy: not a plugin type the collection may ship",
        "plugins/action/facts.py:1: imports ansible.executor.task_executor",
        "plugins/action/facts.py:7: self._low_level_execute_command is not on the plugin base class's public surface",
        "plugins/callback/preload.py:1: imports gc",
        "plugins/callback/preload.py:2: imports ansible.plugins.loader",
        "plugins/callback/preload.py:3: imports ansible.template",
        "plugins/callback/preload.py:4: calls gc.freeze",
        "plugins/lookup/template.py:1: imports ansible.plugins.lookup.template",
        "plugins/modules/m.py:2: imports ansible.parsing.dataloader (modules run on the host: module_utils only)",
        "plugins/strategy/linear.py:1: imports ansible.plugins.strategy.linear",
    ], found
