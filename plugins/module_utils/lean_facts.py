# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The facts the roles read, gathered by only the Ansible collectors that make them.

Why: ``ansible.module_utils.facts``' package ``__init__`` imports every
platform's collectors (``default_collectors``). A module runs from its zipped
payload, which has no bytecode cache, so every run compiles them all: about
0.1 s of each host's CPU, on every converge, in the one step a compute node
still runs on a no-op. Setup's ``min`` subset then runs a dozen collectors
(users, ssh keys, environment, ...) whose facts the roles' filter drops.

When every fact asked is one of :data:`FACT_COLLECTORS` on Linux, only the
collectors that make them are imported (the package's ``__init__`` is not run)
and run; the facts are those the same collectors give ``ansible.builtin.setup``
(a unit test and the molecule scenarios compare the two on each Debian major).
Anything else goes through Ansible's whole collector set, as setup does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import importlib.util
import sys

FACTS_PACKAGE = "ansible.module_utils.facts"

# Fact name -> the collector that makes it (its name in setup's gather_subset).
FACT_COLLECTORS = {
    "distribution": "distribution",
    "distribution_release": "distribution",
    "distribution_major_version": "distribution",
    "distribution_version": "distribution",
    "distribution_file_variety": "distribution",
    "os_family": "distribution",
    "architecture": "platform",
    "hostname": "platform",
    "nodename": "platform",
    "fqdn": "platform",
    "domain": "platform",
    "kernel": "platform",
    "system": "platform",
    "pkg_mgr": "pkg_mgr",
    "service_mgr": "service_mgr",
    "virtualization_type": "virtual",
    "virtualization_role": "virtual",
    "default_ipv4": "network",
    "default_ipv6": "network",
    "processor": "hardware",
    "processor_vcpus": "hardware",
    "processor_count": "hardware",
    "processor_cores": "hardware",
    "processor_threads_per_core": "hardware",
    "processor_nproc": "hardware",
    "memtotal_mb": "hardware",
    "swaptotal_mb": "hardware",
    "local": "local",
    # Set by the collector set itself (as setup does), whatever was gathered.
    "module_setup": None,
}
# Collectors setup runs only when gather_subset names them (or "all"); the
# others are in its "min" subset, always run.
OPTIONAL_SUBSETS = frozenset(["hardware", "virtual", "network"])
KNOWN_SUBSETS = OPTIONAL_SUBSETS | frozenset(["min", "all"])
ALWAYS = ("platform", "distribution")


def collectors_for(filter_spec, gather_subset):
    """The collector names that make every fact of ``filter_spec``, or None when the lean path does not apply.

    It applies when each pattern is a plain name of :data:`FACT_COLLECTORS`
    (``ansible_`` prefix or not; no wildcard), and ``gather_subset`` is made of
    ``min``, ``all`` and the optional subsets only and includes the subset of
    each fact asked: the lean path then gathers exactly what setup keeps.
    """
    if not filter_spec:
        return None
    subsets = set(gather_subset or ["all"])
    if not subsets <= KNOWN_SUBSETS:
        return None
    names = set()
    for pattern in filter_spec:
        fact = pattern[len("ansible_"):] if pattern.startswith("ansible_") else pattern
        if fact not in FACT_COLLECTORS:
            return None
        collector = FACT_COLLECTORS[fact]
        if collector is None:
            continue
        if collector in OPTIONAL_SUBSETS and not subsets & {collector, "all"}:
            return None
        names.add(collector)
    # Always: cheap, and other collectors read their facts (pkg_mgr and
    # service_mgr require them; hardware and network read the architecture
    # and the distribution when present), as they do in setup's min subset.
    return sorted(names | set(ALWAYS))


def _import_facts_package_without_init():
    """Make ``ansible.module_utils.facts`` importable as a package whose ``__init__`` has not run.

    Its ``__init__`` only re-exports ``compat`` (which imports every platform's
    collectors); the collector modules import what they need themselves.
    Nothing is done when the package is already imported.
    """
    if FACTS_PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(FACTS_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("%s is not a package here" % FACTS_PACKAGE)
    sys.modules[FACTS_PACKAGE] = importlib.util.module_from_spec(spec)


def holders_of(module, ip_path, addresses):
    """The interfaces that hold one of ``addresses`` (``ip -o addr``), or None when ``ip`` cannot tell.

    Each line of ``ip -o addr`` is one address: index, interface, family, address[/prefix], ...
    """
    wanted = {address for address in addresses if address}
    if not wanted:
        return []
    rc, out, dummy = module.run_command([ip_path, "-o", "addr", "show"], errors="surrogate_then_replace")
    if rc != 0:
        return None
    devices = []
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2] in ("inet", "inet6") and words[3].split("/")[0] in wanted:
            if words[1] not in devices:
                devices.append(words[1])
    return devices


class _InterfacesGlob(object):
    """The ``glob`` module, except that the list of interfaces is ``devices``."""

    SYSFS_INTERFACES = "/sys/class/net/*"

    def __init__(self, real, devices):
        self.real = real
        self.devices = devices

    def glob(self, pattern):
        if pattern == self.SYSFS_INTERFACES:
            return [self.SYSFS_INTERFACES[:-1] + device for device in self.devices]
        return self.real.glob(pattern)


@contextlib.contextmanager
def only_interfaces(network_module, devices):
    """While in the block, ``network_module`` lists only ``devices`` as the host's interfaces."""
    real = network_module.glob
    network_module.glob = _InterfacesGlob(real, devices)
    try:
        yield
    finally:
        network_module.glob = real


def gather(module, collector_names, filter_spec, gather_timeout):
    """The facts of ``filter_spec``, gathered by the Linux collectors ``collector_names`` only.

    None when those collectors cannot be imported that way (the caller then
    gathers as setup does).
    """
    try:
        _import_facts_package_without_init()
        from ansible.module_utils.facts import ansible_collector
        from ansible.module_utils.facts.hardware import linux as linux_hardware
        from ansible.module_utils.facts.namespace import PrefixFactNamespace
        from ansible.module_utils.facts.network import linux as linux_network
        from ansible.module_utils.facts.system.distribution import DistributionFactCollector
        from ansible.module_utils.facts.system.local import LocalFactCollector
        from ansible.module_utils.facts.system.pkg_mgr import PkgMgrFactCollector
        from ansible.module_utils.facts.system.platform import PlatformFactCollector
        from ansible.module_utils.facts.system.service_mgr import ServiceMgrFactCollector
        from ansible.module_utils.facts.virtual.linux import LinuxVirtualCollector
    except ImportError:
        return None

    class CpuMemoryHardware(linux_hardware.LinuxHardware):
        """LinuxHardware with only the parts the facts of FACT_COLLECTORS come from: CPU and memory.

        Not run: mounts (findmnt, a statvfs of each), devices (sysfs of every
        disk), LVM (vgs, lvs), DMI and uptime, most of the hardware subset's
        time; nor ``locale -a``, which picks the locale of those commands (CPU
        and memory read /proc only).
        """

        def populate(self, collected_facts=None):
            facts = self.get_cpu_facts(collected_facts=collected_facts)
            facts.update(self.get_memory_facts())
            return facts

    class CpuMemoryHardwareCollector(linux_hardware.LinuxHardwareCollector):
        _fact_class = CpuMemoryHardware

    class DefaultAddressNetwork(linux_network.LinuxNetwork):
        """LinuxNetwork for default_ipv4 and default_ipv6 only.

        Those two are completed from the interface that holds the default route's
        source address; LinuxNetwork reads every interface to find it (two
        ``ip addr`` runs each, and ``ethtool`` where installed), which on a node
        that shares its host with Kubernetes means every pod's veth. Here one
        ``ip -o addr`` names the interfaces that hold a default address, and only
        they are read. Not run: the locally reachable addresses (no fact asked).
        """

        def get_interfaces_info(self, ip_path, default_ipv4, default_ipv6):
            devices = holders_of(self.module, ip_path, [default_ipv4.get("address"), default_ipv6.get("address")])
            if devices is None:
                return super(DefaultAddressNetwork, self).get_interfaces_info(ip_path, default_ipv4, default_ipv6)
            # LinuxNetwork lists the interfaces with glob.glob("/sys/class/net/*") and
            # has no other way to be given them.
            with only_interfaces(linux_network, devices):
                return super(DefaultAddressNetwork, self).get_interfaces_info(ip_path, default_ipv4, default_ipv6)

        def get_locally_reachable_ips(self, ip_path):
            return {}

    class DefaultAddressNetworkCollector(linux_network.LinuxNetworkCollector):
        _fact_class = DefaultAddressNetwork

    collector = ansible_collector.get_ansible_collector(
        # In default_collectors' order.
        all_collector_classes=[PlatformFactCollector, DistributionFactCollector, PkgMgrFactCollector,
                               ServiceMgrFactCollector, LinuxVirtualCollector, CpuMemoryHardwareCollector,
                               DefaultAddressNetworkCollector, LocalFactCollector],
        namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
        filter_spec=filter_spec,
        # The metadata collector records this as ansible_gather_subset, which
        # the lean path never returns (not in FACT_COLLECTORS).
        gather_subset=list(collector_names),
        gather_timeout=gather_timeout,
        minimal_gather_subset=frozenset(),
    )
    return collector.collect(module=module)
