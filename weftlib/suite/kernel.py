"""The Jupyter kernel every notebook of a run executes in: this interpreter, registered once as `weftlib`,
reached over Unix sockets private to one notebook of one run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

KERNEL_NAME = "weftlib"


def ensure_kernel(name: str = KERNEL_NAME) -> None:
    """Register this interpreter as the `weftlib` Jupyter kernel unless a kernel of that name exists."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
        return
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(kernel_name=name, display_name="weftlib (RFD 1129)", prefix=sys.prefix)


def ipc_kernel_manager(socket_dir: Path) -> type:
    """A kernel manager that talks to its local kernel over Unix sockets (IPC), not TCP: nothing listens on
    a port, and the kernel does not print its 'running over TCP without encryption' warning. The sockets and
    the connection file live in `socket_dir`, private to one notebook of one run: by default jupyter_client
    names them `kernel-ipc-N` relative to the working directory, where two runs pick the same names and a
    read-only checkout cannot bind at all."""
    from jupyter_client import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            kwargs.setdefault("connection_file", str(socket_dir / "kernel.json"))
            super().__init__(transport="ipc", ip=str(socket_dir / "kernel"), **kwargs)

    return IPCKernelManager
