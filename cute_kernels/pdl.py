"""Programmatic dependent launch (PDL): each kernel of a call overlaps its launch with the
tail of the kernel before it in the stream.

Every kernel is launched with ``use_pdl=True`` (the launch attribute
cudaLaunchAttributeProgrammaticStreamSerialization) and runs ``enter()`` first:

  griddepcontrol.wait               this thread reads nothing (inputs, workspace, state) until
                                    the previous grid in the stream has completed and its
                                    memory is flushed: the ordering a plain launch has
  griddepcontrol.launch_dependents  the next kernel may be scheduled once every CTA of this
                                    grid has issued this (or exited); its CTAs then wait in
                                    their own enter()

So the next kernel's launch and CTA scheduling happen under this kernel's last wave instead of
after it.  Kernels of other libraries are unaffected: after a kernel that never triggers, the
wait returns when that kernel completes, as without PDL; a PDL-aware kernel launched after ours
must wait before reading what we wrote, as the PDL contract requires of it.
"""
from __future__ import annotations

import cutlass.cute as cute

USE_PDL = True          # the launch attribute of every kernel of the library


def enter() -> None:
    """The first statement of every kernel (before any global-memory read)."""
    cute.arch.griddepcontrol_wait()
    cute.arch.griddepcontrol_launch_dependents()
