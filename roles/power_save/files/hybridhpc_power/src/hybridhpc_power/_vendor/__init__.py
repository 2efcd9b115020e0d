"""Modules copied from the collection's plugins/module_utils by tools/vendor.sh.

``hostlist.py`` is generated (never committed, see .gitignore): run
``tools/vendor.sh`` before building or testing the package.
"""
