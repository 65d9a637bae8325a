"""``import kerncap_shim.auto`` installs the shim (see kerncap_shim.install)."""
from . import install as _install

_install()
