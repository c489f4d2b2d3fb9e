"""The ground floor: what every other room speaks in. Devices and their health, the backend
plugin interface and a runtime's parts, the registry that finds backends at run time, errors, the
configuration (parsed once), kernel types and array dtypes, targets, sizes, atomic files, hooks
(how this floor asks a question a floor above answers), launch counters and the fused-work flag;
and what every door shares: optional libraries (``optional.require``), the one device-list
syntax (``device_list``), the commands' exit statuses and one-line errors (``exit_status``).

May import: the standard library, NumPy, PyYAML, and :mod:`hetero.language` / :mod:`hetero.math`
(the same floor). Never a vendor library at import time, never a floor above (ask through a hook).
"""
