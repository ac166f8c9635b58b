"""System profiles: servers (kind, α, β, capacity), network (e, t) and clients."""

from .profile import KINDS, Network, Server, System, builtin_names, load_system

__all__ = ["KINDS", "Network", "Server", "System", "builtin_names", "load_system"]
