# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
name: template
short_description: The text of a template, as ansible.builtin.template's lookup renders it, without copying every variable
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
description:
  - Renders templates exactly as P(ansible.builtin.template#lookup) does (the same search path, options, added
    variables and result), the roles' configuration files (slurm.conf, apptainer.conf, slurmdbd.conf, ...) among them.
  - The one difference is the copy of the variables the template sees. ansible-core 2.18's lookup makes a deep copy of
    every variable of the host (the cluster's model, each node's facts) for each file it renders, so that the template
    cannot change them; on a compute node's no-op run of site.yml those copies were a fifth of the controller's CPU for
    that node, growing with the cluster. This lookup gives the template a new dictionary of the same variables
    (O(template_vars) and the template's own variables go there, not into the host's), and the values themselves
    are shared. A template that changes a value in place (C({{ some_list.append(1) }})) would change the host's
    variable; none of the collection's templates does.
options:
  _terms:
    description: The templates to render (found as P(ansible.builtin.template#lookup) finds them).
  convert_data:
    type: bool
    description:
      - Whether to convert YAML into data. If False, strings that are YAML will be left untouched.
      - Mutually exclusive with the jinja2_native option.
    default: true
  variable_start_string:
    description: The string marking the beginning of a print statement.
    default: '{{'
    type: str
  variable_end_string:
    description: The string marking the end of a print statement.
    default: '}}'
    type: str
  jinja2_native:
    description:
      - Controls whether to use Jinja2 native types.
      - It is off by default even if global jinja2_native is True.
      - Has no effect if global jinja2_native is False.
      - Mutually exclusive with the convert_data option.
    default: false
    type: bool
  template_vars:
    description: A dictionary, the keys become additional variables available for templating.
    default: {}
    type: dict
  comment_start_string:
    description: The string marking the beginning of a comment statement.
    type: str
    default: '{#'
  comment_end_string:
    description: The string marking the end of a comment statement.
    type: str
    default: '#}'
seealso:
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Render slurm.conf from the role's templates directory
  ansible.builtin.debug:
    msg: "{{ lookup('hybridhpc.slurm.template', 'slurm.conf.j2') }}"
"""

RETURN = r"""
_raw:
  description: The rendered text of each template.
  type: list
  elements: raw
"""

from ansible.plugins.lookup.template import LookupModule as TemplateLookup


class _CopiedOnlyAtTheTop(dict):
    """The variables, handed to ansible.builtin.template's lookup: its deep copy of them is a new dictionary of the
    same values."""

    def __deepcopy__(self, memo):
        return dict(self)


class LookupModule(TemplateLookup):

    def run(self, terms, variables=None, **kwargs):
        return super(LookupModule, self).run(terms, _CopiedOnlyAtTheTop(variables or {}), **kwargs)
