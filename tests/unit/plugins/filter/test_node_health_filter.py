"""The first play judges node_health_checks with hybridhpc-health's own rules."""

from ansible_collections.hybridhpc.slurm.plugins.filter.node_health import slurm_health_check_problems


def test_good_checks_pass_and_none_is_fine():
    assert slurm_health_check_problems([{"name": "tmp", "type": "free_space", "path": "/tmp", "min_free_mb": 10, "timeout": 5}]) == []
    assert slurm_health_check_problems([]) == []


def test_bad_checks_are_named_as_the_inventory_names_them():
    problems = slurm_health_check_problems([{"name": "tmp", "type": "free_spce", "path": "/tmp"}, {"name": "tmp", "type": "mount"}])
    assert problems[0].startswith("node_health_checks[0] (tmp): type: unknown check type 'free_spce'")
    assert "node_health_checks[1] (tmp): name: duplicate of checks[0]" in problems
    assert "node_health_checks[1] (tmp): path: required for a mount check" in problems
