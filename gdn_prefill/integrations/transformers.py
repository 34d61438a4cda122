"""Route the prefill of transformers' Gated DeltaNet layers to gdn_prefill.

    from gdn_prefill.integrations import transformers as gdn_transformers

    gdn_transformers.enable()                 # from now on, until disable()
    with gdn_transformers.enabled():          # or for a block: restored on exit
        out = model.generate(...)

Where the layer picks its kernel (transformers 5.23): every Gated DeltaNet layer
(Qwen3NextGatedDeltaNet, Qwen3_5GatedDeltaNet, Qwen3_5MoeGatedDeltaNet, OlmoHybridGatedDeltaNet, ...)
calls the function `torch_chunk_gated_delta_rule` of its own modeling module, looked up by name
at each call, for every forward but a cached single-token decode step, which calls
`torch_recurrent_gated_delta_rule`.  That module attribute is transformers' own dispatch point (its
hub-kernel decorator puts FLA's kernel, where FLA is installed, behind the same name); it is the one
this integration replaces, in every module that defines it:

- the modeling modules of qwen3_next and qwen3_5, and every `transformers.models.*.modeling_*`
  module whose source defines `torch_chunk_gated_delta_rule` (found by reading the files, then
  imported);
- every module already imported that defines it (remote-code models: load the model first);
- or exactly the modules passed to enable() / enabled().

The replacement calls `gdn_prefill.chunk_gated_delta_rule` (prefill, multi-token steps); the
recurrent decode step stays transformers'.  It takes what the layer passes: the chunk size of the
torch path (ignored: the recurrence is the same), `cu_seqlens` (the layer's `cu_seq_lens_q`) and
the model's other keywords (use_cache, position_ids, ...; ignored as the FLA layer ignores them).
Its rules are the FLA layer's (bf16 q/k/v on a Hopper GPU, K = V = 128; any strides, copied where
the kernels cannot read them: the layer's q, k and v are views of a transposed convolution output,
so each is copied once, see gdn_prefill.fla.explain_copies).  The kernels have no backward pass:
a call that would need one (grad enabled and an input that requires grad) raises; run the model
under torch.no_grad() or torch.inference_mode(), as generate() does.

transformers is imported only by enable(), enabled() and gdn_modules(), never by gdn_prefill itself.
"""
from __future__ import annotations

import contextlib
import glob
import importlib
import inspect
import logging
import os
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from .. import fla as _fla
from ..errors import GdnArgumentError

FUNCTION = "torch_chunk_gated_delta_rule"
"""The module attribute each Gated DeltaNet layer of transformers calls for its chunked forward."""
MODELS = ("qwen3_next", "qwen3_5")
"""The model types routed by name (others are found by their source)."""

_log = logging.getLogger("gdn_prefill")
_lock = threading.RLock()
# module name -> (the module, the function it held, the replacement put there)
_routed: dict[str, tuple[ModuleType, Any, Callable[..., Any]]] = {}

ModuleLike = Union[ModuleType, str]


def _transformers_sources() -> list[str]:
    """The transformers.models.*.modeling_* modules whose source defines FUNCTION, without importing
    them (the named MODELS first)."""
    try:
        import transformers.models as models
    except ImportError as e:
        raise ImportError("gdn_prefill.integrations.transformers: transformers is not installed "
                          "(pip install transformers)") from e
    root = os.path.dirname(os.path.abspath(models.__file__))
    needle = f"def {FUNCTION}(".encode()
    found = []
    for path in sorted(glob.glob(os.path.join(root, "*", "modeling_*.py"))):
        with open(path, "rb") as f:
            if needle in f.read():
                rel = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                found.append(f"transformers.models.{rel}")
    named = [m for m in found if m.split(".")[2] in MODELS]
    return named + [m for m in found if m not in named]


def _gdn_function(module: ModuleType) -> Optional[Callable[..., Any]]:
    """The module's own FUNCTION (its __dict__: no lazy module's __getattr__ runs), if it is one
    the replacement can stand in for: the first five parameters positional, the fourth and fifth
    named g and beta, as transformers' torch_chunk_gated_delta_rule(query, key, value, g, beta, ...)."""
    fn: Any = vars(module).get(FUNCTION)
    if not callable(fn):
        return None
    if getattr(fn, "_gdn_prefill_original", None) is not None:
        return fn  # type: ignore[no-any-return]  # ours already
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) < 5 or any(p.kind not in positional for p in params[:5]):
        return None
    if (params[3].name, params[4].name) != ("g", "beta"):
        return None
    return fn  # type: ignore[no-any-return]


def gdn_modules(modules: Optional[Iterable[ModuleLike]] = None) -> list[ModuleType]:
    """The modules enable() routes: `modules` (objects or import names), each of which must define
    a compatible torch_chunk_gated_delta_rule; or, by default, transformers' modules that define it
    (imported here) and every module already imported that defines it."""
    if modules is not None:
        out = []
        for m in modules:
            mod = importlib.import_module(m) if isinstance(m, str) else m
            if not isinstance(mod, ModuleType):
                raise GdnArgumentError(f"modules: expected modules or module names, got {type(m).__qualname__}")
            if _gdn_function(mod) is None:
                raise GdnArgumentError(f"modules: {mod.__name__} defines no {FUNCTION}(query, key, value, g, beta, "
                                       "...) to route")
            out.append(mod)
        return out
    found: dict[str, ModuleType] = {}
    for name in _transformers_sources():
        try:
            mod = importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a model module needing what is not installed: not routed, said
            _log.warning("gdn_prefill: %s not routed: importing it failed (%s: %s)", name, type(e).__name__, e)
            continue
        if _gdn_function(mod) is not None:
            found[name] = mod
    for name, mod in list(sys.modules.items()):
        if (isinstance(mod, ModuleType) and name not in found and not name.startswith("gdn_prefill")
                and FUNCTION in vars(mod) and _gdn_function(mod) is not None):
            found[name] = mod
    return list(found.values())


def _replacement(original: Callable[..., Any]) -> Callable[..., Any]:
    """transformers' call of FUNCTION, served by gdn_prefill.chunk_gated_delta_rule."""

    def torch_chunk_gated_delta_rule(query: Any, key: Any, value: Any, g: Any, beta: Any, chunk_size: int = 64,
                                     initial_state: Any = None, output_final_state: bool = False,
                                     use_qk_l2norm_in_kernel: bool = False, **kwargs: Any) -> Any:
        _fla.inference_only({"q": query, "k": key, "v": value, "g": g, "beta": beta, "initial_state": initial_state},
                            "run the model under torch.no_grad() or torch.inference_mode() (generate() does), or "
                            "outside gdn_prefill.integrations.transformers.enabled()")
        # chunk_size: the torch path's chunk length; the recurrence does not depend on it.  The
        # function replaced ignores its **kwargs; the FLA keywords among them (cu_seqlens, ...) go
        # on to the FLA layer, which would reject the model's others by name
        fla_kwargs = {n: x for n, x in kwargs.items() if n in _fla.FLA_KEYWORDS or n == "cu_seqlens"}
        return _fla.chunk_gated_delta_rule(query, key, value, g, beta, initial_state=initial_state,
                                           output_final_state=output_final_state,
                                           use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, **fla_kwargs)

    torch_chunk_gated_delta_rule._gdn_prefill_original = original  # type: ignore[attr-defined]
    torch_chunk_gated_delta_rule.__doc__ = (f"gdn_prefill.chunk_gated_delta_rule standing in for "
                                            f"{getattr(original, '__module__', '?')}.{FUNCTION} "
                                            "(gdn_prefill.integrations.transformers)")
    return torch_chunk_gated_delta_rule


def enable(modules: Optional[Iterable[ModuleLike]] = None) -> list[str]:
    """Route FUNCTION of gdn_modules(modules) to gdn_prefill; returns the names of the modules
    routed by this call (those already routed are left as they are)."""
    mods = gdn_modules(modules)
    newly = []
    with _lock:
        for mod in mods:
            if mod.__name__ in _routed:
                continue
            original = vars(mod)[FUNCTION]
            if getattr(original, "_gdn_prefill_original", None) is not None:
                continue                                    # routed by another copy of this module
            replacement = _replacement(original)
            setattr(mod, FUNCTION, replacement)
            _routed[mod.__name__] = (mod, original, replacement)
            newly.append(mod.__name__)
    if newly:
        _log.info("gdn_prefill: transformers prefill routed to gdn_prefill in %s", ", ".join(newly))
    return newly


def disable(modules: Optional[Iterable[ModuleLike]] = None) -> list[str]:
    """Put back the functions enable() replaced (in `modules` only, if given: objects or names);
    returns the names of the modules restored.  A module whose function was replaced again since
    (by someone else) keeps that one and is not listed."""
    with _lock:
        names = list(_routed) if modules is None else [m if isinstance(m, str) else m.__name__ for m in modules]
        restored = []
        for name in names:
            entry = _routed.pop(name, None)
            if entry is None:
                continue
            mod, original, replacement = entry
            if vars(mod).get(FUNCTION) is replacement:
                setattr(mod, FUNCTION, original)
                restored.append(name)
            else:
                _log.warning("gdn_prefill: %s.%s was replaced again since enable(); left as it is", name, FUNCTION)
    return restored


def routed() -> list[str]:
    """The names of the modules whose prefill is routed to gdn_prefill now."""
    with _lock:
        return [name for name, (mod, _, replacement) in _routed.items() if vars(mod).get(FUNCTION) is replacement]


@contextlib.contextmanager
def enabled(modules: Optional[Iterable[ModuleLike]] = None) -> Iterator[list[str]]:
    """enable(modules) for a block: yields the names of the modules it routed, and restores those
    (only those: routes made before the block stay) on exit, exception or not."""
    newly = enable(modules)
    try:
        yield newly
    finally:
        disable(newly)
