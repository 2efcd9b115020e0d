"""Values a test hands Ansible's templar, trusted as templates the way Ansible trusts a role's files.

ansible-core 2.19 templates only strings marked trusted (its public
``ansible.template.trust_as_template``) and returns any other as it is; a test
that reads a role's YAML or template with plain Python must mark them. 2.18
templates every string and has no such mark.
"""

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core 2.18
    trust_as_template = None


def trusted(value):
    """value, with every string in it (in dicts, lists and tuples too) trusted as a template."""
    if trust_as_template is None:
        return value
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(trusted(item) for item in value)
    return value
