"""The docs cannot drift: every relative link and anchor in README.md, CONTRIBUTING.md,
CHANGELOG.md and docs/*.md resolves, and every CLI flag, config file, config override,
registered name, component setting and project command they name exists.

What counts as a claim: links anywhere in the prose; commands only in code (inline spans
and fenced blocks), i.e. `spacy-elmo CMD ...`, `python -m spacy_elmo CMD ...`, `spacy CMD
...` and `python -m spacy CMD ...`; repository paths (configs/, lab/, ...) and the lab's
commands (`python -m spacy_elmo_lab.MODULE`) only in code.
A `--flag` in prose or in a span without a command is not checked (it has no command).
CHANGELOG.md and benchmarks/results/*.md are history: only their links are checked."""
import inspect
import re
import shlex
import subprocess
import unicodedata
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple
from urllib.parse import unquote

import pytest
import srsly
import typer
from thinc.api import Config

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 200
# scripts/ is gone (its commands are the lab's modules): a path into it is reported
REPO_DIRS = ("configs", "scripts", "lab", "benchmarks", "spacy_elmo", "tests", "demo", "docs")
SHELL_LANGS = {"", "bash", "sh", "shell", "console", "zsh"}
HISTORY = {"CHANGELOG.md"}  # history: its links must resolve, its commands stay as they ran
SEPARATORS = {"&&", "||", "|", ";", "&"}


def doc_files(root: Path) -> List[Path]:
    """README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md under `root`."""
    files = [root / "README.md", root / "CONTRIBUTING.md", root / "CHANGELOG.md"]
    return [f for f in files if f.exists()] + sorted((root / "docs").glob("*.md"))


# --- markdown ------------------------------------------------------------------------------

@dataclass
class Code:
    text: str
    line: int
    lang: str  # "span" for inline code, else the fence's info string


@dataclass
class Page:
    path: Path
    text: str
    prose: str = ""  # the text with fenced blocks blanked (line numbers kept)
    code: List[Code] = field(default_factory=list)

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n\s*\n).)+?)(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def parse(path: Path) -> Page:
    text = path.read_text(encoding="utf8")
    page = Page(path=path, text=text)
    lines = text.split("\n")
    prose: List[str] = []
    fence: Optional[Tuple[str, str, int, List[str]]] = None
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = (match.group(1), match.group(2).lower(), number, [])
            prose.append("")
        elif fence is not None:
            marker = fence[0]
            if line.strip().startswith(marker) and not line.strip().strip(marker[0]):
                page.code.append(Code("\n".join(fence[3]), fence[2] + 1, fence[1]))
                fence = None
            else:
                fence[3].append(line)
            prose.append("")
        else:
            prose.append(line)
    page.prose = "\n".join(prose)
    for match in SPAN.finditer(page.prose):
        span = " ".join(match.group(2).split())
        page.code.append(Code(span, page.line_of(match.start()), "span"))
    return page


def without_spans(prose: str) -> str:
    """The prose with inline code blanked (same length, newlines kept)."""
    return SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(page: Page) -> Set[str]:
    found: Set[str] = set(HTML_ANCHOR.findall(page.text))
    seen: Dict[str, int] = {}
    for line in page.prose.split("\n"):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


# --- links ---------------------------------------------------------------------------------

def check_links(root: Path, page: Page, pages: Dict[Path, Page]) -> Iterator[str]:
    prose = without_spans(page.prose)
    for match in LINK.finditer(prose):
        target = unquote(match.group(1))
        line = page.line_of(match.start())
        where = f"{page.path.relative_to(root)}:{line}"
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        base = page.path.parent  # as a browser resolves it, spaCy's generated part too
        if file_part.startswith("/"):
            base, file_part = root, file_part.lstrip("/")
        resolved = (base / file_part).resolve() if file_part else page.path
        if not resolved.exists():
            yield f"{where}: link to a missing file: {target}"
            continue
        if not anchor:
            continue
        if resolved.suffix != ".md" or resolved.is_dir():
            yield f"{where}: anchor on a file that is not markdown: {target}"
            continue
        target_page = pages.get(resolved) or parse(resolved)
        if anchor not in anchors(target_page):
            yield f"{where}: no heading for the anchor #{anchor} in {file_part or page.path.name}"


# --- commands ------------------------------------------------------------------------------

# Typer's commands are click commands (typer may bring its own copy of click): a group has
# `commands`, an option is a param of `param_type_name` "option".

@cache
def elmo_cli() -> Any:
    from spacy_elmo.cli import app

    return typer.main.get_command(app)


@cache
def spacy_cli() -> Any:
    import spacy.cli

    return typer.main.get_command(spacy.cli.app)


@cache
def pretrain_settings() -> Tuple[Set[str], Set[str]]:
    """The pretraining settings' section.key paths and their shortcut flags."""
    from spacy_elmo.pretrain import declaration
    from spacy_elmo.pretrain.config import PretrainConfig

    return set(declaration.by_path(PretrainConfig)), set(declaration.by_flag(PretrainConfig))


def is_pretrain_setting(key: str) -> bool:
    """A pretraining setting's path, or a biLM option below `model.options`."""
    from spacy_elmo.bilm.options import OPTION_RULES

    section, _, option = key.rpartition(".")
    return (key in pretrain_settings()[0]
            or (section == "model.options" and option in OPTION_RULES))


def is_group(command: Any) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def options_of(command: Any) -> Set[str]:
    names: Set[str] = {"--help"}
    for param in command.params:
        if param.param_type_name == "option":
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def shell_lines(code: Code) -> Iterator[str]:
    """The logical command lines of a span or shell block (continuations joined)."""
    if code.lang == "span":
        yield code.text
        return
    if code.lang not in SHELL_LANGS:
        return
    for line in code.text.replace("\\\n", " ").split("\n"):
        yield re.sub(r"^\s*\$\s+", "", line)


def commands(line: str) -> Iterator[List[str]]:
    """Each simple command of a shell line, as tokens (brackets of optional parts dropped)."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        tokens = line.split()
    current: List[str] = []
    for token in tokens:
        if token in SEPARATORS:
            yield current
            current = []
            continue
        ends = token.endswith(";")
        token = token.rstrip(";").strip("[]")
        if token:
            current.append(token)
        if ends:
            yield current
            current = []
    yield current


def is_placeholder(token: str) -> bool:
    return token in {"...", "…"} or bool(re.fullmatch(r"[A-Z][A-Z0-9_|.]*", token))


def is_flag(token: str) -> bool:
    return bool(re.match(r"--?[A-Za-z]", token))


def find_program(tokens: Sequence[str]) -> Optional[Tuple[str, int]]:
    """('elmo' | 'spacy', index of the first token after the program) for a command that
    runs spacy-elmo or spaCy."""
    for i, token in enumerate(tokens):
        if token == "spacy-elmo":
            return "elmo", i + 1
        if token == "spacy" and i == 0:
            return "spacy", i + 1
        if token == "-m" and i + 1 < len(tokens) and tokens[i + 1] in ("spacy_elmo", "spacy"):
            return ("elmo" if tokens[i + 1] == "spacy_elmo" else "spacy"), i + 2
    return None


@dataclass
class Context:
    root: Path

    @cached_property
    def project(self) -> Dict[str, Any]:
        path = self.root / "project.yml"
        return srsly.read_yaml(path) if path.exists() else {}

    @cached_property
    def elsewhere(self) -> List[str]:
        """Paths the docs may name that are not in the tree: what a project command writes
        (its outputs), and what a doc says to restore with `git checkout HASH -- PATH`
        (checked to be in that commit where the clone has history)."""
        found = [out for command in self.project.get("commands", [])
                 for out in command.get("outputs", []) if "$" not in out]
        text = "\n".join(f.read_text(encoding="utf-8") for f in doc_files(self.root))
        for commit, path in set(CHECKOUT.findall(text)):
            assert in_commit(self.root, commit, path), f"{path} is not in commit {commit}"
            found.append(path)
        return found

    def exists(self, path: str) -> bool:
        return (self.root / path).exists() or any(
            path == other or path.startswith(other.rstrip("/") + "/")
            or other.startswith(path.rstrip("/") + "/") for other in self.elsewhere)


CHECKOUT = re.compile(r"git checkout ([0-9a-f]{7,40}) -- ([\w./-]+)")


def in_commit(root: Path, commit: str, path: str) -> bool:
    """Whether `commit` has `path` (True in a clone without that history: nothing to ask)."""
    if not (root / ".git").exists():
        return True
    known = subprocess.run(["git", "cat-file", "-e", commit], cwd=root, capture_output=True)
    if known.returncode != 0:  # a shallow clone
        return True
    found = subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=root,
                           capture_output=True)
    return found.returncode == 0


def config_keys(path: Path) -> Config:
    return Config().from_disk(path, interpolate=False)


def check_override(flag: str, config_path: Optional[Path], ctx: Context) -> Optional[str]:
    """None when `--section.key` names a setting of the config it is used with."""
    keys = flag[2:].split("=")[0].split(".")
    if config_path is None:
        return f"{flag}: an override without a config file to override"
    if not config_path.exists():
        return None  # the missing file is reported by the path check
    if config_path.suffix != ".cfg":
        return f"{flag}: {config_path.name} is not a .cfg file with sections"
    node: object = config_keys(config_path)
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return f"{flag}: no setting {'.'.join(keys)} in {config_path.relative_to(ctx.root)}"
        node = node[key]
    return None


def check_command(tokens: List[str], ctx: Context) -> Iterator[str]:
    found = find_program(tokens)
    if found is None:
        return
    program, i = found
    group = elmo_cli() if program == "elmo" else spacy_cli()
    path = ["spacy-elmo" if program == "elmo" else "spacy"]
    while is_group(group) and i < len(tokens) and not is_flag(tokens[i]):
        name = tokens[i]
        if is_placeholder(name):
            return
        sub = group.commands.get(name)
        if sub is None:
            yield f"`{' '.join(path)} {name}`: no such command"
            return
        group, path, i = sub, path + [name], i + 1
    if is_group(group):
        return
    args = tokens[i:]
    allowed = options_of(group)
    pretrain = path == ["spacy-elmo", "pretrain"]
    if pretrain:  # its settings' shortcut flags, parsed by the command itself
        allowed |= set(pretrain_settings()[1])
    config = next((ctx.root / a for a in args if re.search(r"\.(cfg|json)$", a)), None)
    unnamed = config is None and any(is_placeholder(a) for a in args)  # `... CONFIG --x.y`
    if path == ["spacy", "project", "run"]:
        yield from check_project_run(args, ctx)
    for arg in args:
        if not is_flag(arg) or re.match(r"-\d", arg):
            continue
        flag = arg.split("=")[0]
        command = " ".join(path)
        if "." in flag and flag.startswith("--"):
            if pretrain:  # any declared setting, whether or not the config file lists it
                if not is_pretrain_setting(flag[2:]):
                    yield f"`{' '.join(path)}`: no setting {flag[2:]}"
                continue
            if path == ["spacy", "project", "run"] or unnamed:
                continue
            problem = check_override(flag, config, ctx)
            if problem:
                yield f"`{command}`: {problem}"
        elif flag not in allowed:
            yield f"`{command}`: no option {flag}"


def check_project_run(args: List[str], ctx: Context) -> Iterator[str]:
    project = ctx.project
    names = {c["name"] for c in project.get("commands", [])} | set(project.get("workflows", {}))
    positional = [a for a in args if not is_flag(a)]
    if positional and not is_placeholder(positional[0]) and positional[0] not in names:
        yield f"`spacy project run {positional[0]}`: no such command or workflow in project.yml"


# --- paths, registered names, settings ----------------------------------------------------

PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(REPO_DIRS) + r")/[\w./{},*<>-]*)")


def expand(pattern: str) -> List[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    return [p for alt in match.group(1).split(",")
            for p in expand(pattern[:match.start()] + alt + pattern[match.end():])]


def check_paths(code: Code, ctx: Context) -> Iterator[str]:
    for match in PATH.finditer(code.text):
        raw = match.group(1).rstrip(".,")
        for pattern in expand(re.sub(r"<[^>]*>", "*", raw)):
            if "*" in pattern:
                if not any(ctx.root.glob(pattern.rstrip("/"))):
                    yield f"no file matches {raw}"
            elif not ctx.exists(pattern):
                yield f"no such file: {pattern}"


LAB_MODULE = re.compile(r"(?<![\w.])spacy_elmo_lab\.(\w+)")


def check_lab_modules(code: Code, ctx: Context) -> Iterator[str]:
    for name in LAB_MODULE.findall(code.text):
        if not name.isupper() and not ctx.exists(f"lab/spacy_elmo_lab/{name}.py"):
            yield f"no lab module spacy_elmo_lab.{name}"


VARS = re.compile(r"--vars\.(\w+)")


def check_vars(code: Code, ctx: Context) -> Iterator[str]:
    """`--vars.KEY` (with or without its command) names a variable of project.yml."""
    variables = ctx.project.get("vars", {})
    for key in VARS.findall(code.text):
        if key not in variables:
            yield f"no variable {key} in project.yml"


REGISTERED = re.compile(r"spacy-elmo\.\w+\.v\d+")


@cache
def registered(name: str) -> Optional[object]:
    from spacy.util import registry

    import spacy_elmo  # noqa: F401  (registers the functions)

    for table in ("architectures", "layers", "misc", "callbacks"):
        if registry.has(table, name):
            return registry.get(table, name)
    return None


def parameters(name: str) -> Set[str]:
    func = registered(name)
    assert callable(func)
    return set(inspect.signature(func).parameters)


def check_ini(code: Code) -> Iterator[str]:
    """Sections built by a spacy-elmo function take only its parameters, as keys or as
    subsections."""
    sections: Dict[str, Dict[str, str]] = {}
    current: Optional[str] = None
    for line in code.text.split("\n"):
        line = line.split("#", 1)[0].strip() if not line.strip().startswith("@") else line.strip()
        header = re.fullmatch(r"\[([^\]]+)\]", line)
        if header:
            current = header.group(1)
            sections.setdefault(current, {})
        elif current and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            sections[current][key] = value.split("#")[0].strip().strip('"')
    for name, keys in sections.items():
        function = keys.get("@architectures") or keys.get("@layers")
        if keys.get("factory") == "elmo":
            function = "the elmo factory"
            allowed = set(elmo_factory_config()) | {"factory"}
        elif function and function.startswith("spacy-elmo.") and registered(function):
            allowed = parameters(function)
        else:
            continue
        for key in keys:
            if not key.startswith("@") and key not in allowed:
                yield f"[{name}] {key}: not a setting of {function}"
        for other in sections:
            if other.startswith(name + ".") and other[len(name) + 1:] not in allowed:
                yield f"[{other}]: not a setting of {function}"


@cache
def elmo_factory_config() -> Dict[str, Any]:
    import spacy

    return dict(spacy.blank("en").get_factory_meta("elmo").default_config or {})


def check_settings_table(page: Page) -> Iterator[str]:
    """The component's settings table names only settings of the `elmo` factory and of its
    model block (`model.*`)."""
    factory = elmo_factory_config()
    model = parameters(factory["model"]["@architectures"])
    lines = page.prose.split("\n")
    for number, line in enumerate(lines):
        if not re.match(r"\|\s*setting\s*\|", line):
            continue
        for offset, row in enumerate(lines[number + 2:], number + 3):
            if not row.startswith("|"):
                break
            first = row.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first):
                if name.startswith("model."):
                    known = name[len("model."):] in model
                else:
                    known = name in factory
                if not known:
                    yield f"{page.path.name}:{offset}: {name} is not a setting of the elmo " \
                        "component"


# --- all checks ------------------------------------------------------------------------------

def problems(root: Path, files: Sequence[Path], settings_pages: Sequence[str] = ("component.md",)
             ) -> List[str]:
    ctx = Context(root)
    pages = {f.resolve(): parse(f) for f in files}
    found: List[str] = []
    for page in pages.values():
        found.extend(check_links(root, page, pages))
        if page.path.name in HISTORY:
            continue
        for code in page.code:
            where = f"{page.path.relative_to(root)}:{code.line}"
            for line in shell_lines(code):
                for tokens in commands(line):
                    found.extend(f"{where}: {p}" for p in check_command(tokens, ctx))
            found.extend(f"{where}: {p}" for p in check_paths(code, ctx))
            found.extend(f"{where}: {p}" for p in check_lab_modules(code, ctx))
            found.extend(f"{where}: {p}" for p in check_vars(code, ctx))
            for name in REGISTERED.findall(code.text):
                if registered(name) is None:
                    found.append(f"{where}: {name} is not a registered name")
            if code.lang == "ini":
                found.extend(f"{where}: {p}" for p in check_ini(code))
        if page.path.name in settings_pages and page.path.parent.name == "docs":
            found.extend(check_settings_table(page))
    return found


def test_the_docs_link_and_name_only_what_exists() -> None:
    assert problems(ROOT, doc_files(ROOT)) == []


def test_the_study_records_link_only_what_exists() -> None:
    """benchmarks/results/*.md are records of past runs: their commands stay as they were
    run, but their links must resolve."""
    files = sorted((ROOT / "benchmarks" / "results").glob("*.md"))
    pages = {f.resolve(): parse(f) for f in files}
    assert [p for page in pages.values() for p in check_links(ROOT, page, pages)] == []


def test_the_readme_is_short_and_gives_the_ci_test_command() -> None:
    """CI runs the README's test command itself: `.ci/run` takes the one line of the
    README that its pattern finds, which installs through the pinned versions."""
    readme = (ROOT / "README.md").read_text(encoding="utf8")
    assert len(readme.split("\n")) <= README_MAX_LINES
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf8")
    found = re.search(r"grep -m1 -E '([^']+)' README\.md", ci)
    assert found, ".ci/run no longer takes its test command from the README"
    commands = [line for line in readme.splitlines() if re.search(found.group(1), line)]
    assert len(commands) == 1, commands
    assert "-c test-constraints.txt" in commands[0]
    assert commands[0].endswith("&& python -m pytest tests")


def test_the_docs_pages_are_linked_from_the_readme() -> None:
    readme = parse(ROOT / "README.md")
    targets = {m.group(1).split("#")[0] for m in LINK.finditer(without_spans(readme.prose))}
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "pretrain_settings.md":  # reached from docs/pretraining.md
            assert f"docs/{page.name}" in targets, page.name


# --- the checker itself, on tiny synthetic docs ---------------------------------------------

@pytest.fixture
def tiny_root(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.cfg").write_text(
        "[paths]\ntrain = null\n\n[training]\nmax_steps = 10\n", encoding="utf8")
    (tmp_path / "project.yml").write_text(
        "vars:\n  data_dir: data\ncommands:\n  - name: convert\n    script: []\n"
        "workflows:\n  all:\n    - convert\n", encoding="utf8")
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## The `x` part: 2 ways\n",
                                                encoding="utf8")
    return tmp_path


def check_one(root: Path, markdown: str) -> List[str]:
    page = root / "docs" / "page.md"
    page.write_text(markdown, encoding="utf8")
    return problems(root, [page, root / "docs" / "other.md"])


GOOD = [
    "See [other](other.md), [part](other.md#the-x-part-2-ways) and [top](#title).\n\n# Title\n",
    "[web](https://example.org/x.md#nothing) and `[not a link](missing.md)` in code.\n",
    "```bash\nspacy-elmo embed in.txt out.h5 --weights w --batch-size 8 [--gpu-id 0]\n```\n",
    "Prose names --no-such-flag and `--no-such-flag` alone: no command, nothing to check.\n",
    "`python -m spacy_elmo ...` and `spacy-elmo pretrain --output DIR --resume`.\n",
    "```bash\nspacy train configs/a.cfg --paths.train t.spacy --training.max_steps 5 \\\n"
    "    --output out  # a comment --nonsense\n```\n",
    "`spacy project run all . --vars.data_dir DATA` and `spacy project run COMMAND`.\n",
    "`configs/{a,a}.cfg`, `configs/*.cfg` and `configs/<name>.cfg`.\n",
    "```ini\n[x]\n@architectures = \"spacy-elmo.ElmoListener.v1\"\ngrad_factor = 0.0  # c\n"
    "\n[x.encode]\nwidth = 3\n```\n",
    "```ini\n[components.elmo]\nfactory = \"elmo\"\nstore_layers = true\n```\n",
    "`spacy-elmo pretrain CONFIG --training.max_steps 5`: a placeholder config is not read.\n",
    "`spacy-elmo pretrain CONFIG --model.options.lstm_dim 1024`: a biLM option.\n",
    "<!-- WEASEL: AUTO-GENERATED DOCS START (do not remove) -->\n"
    "[config](../configs/a.cfg) is relative to the page in spaCy's part too\n"
    "<!-- WEASEL: AUTO-GENERATED DOCS END (do not remove) -->\n",
]

BAD = [
    ("[gone](missing.md)", "missing file"),
    ("[gone](other.md#no-such-part)", "anchor"),
    ("[here](#nowhere)\n\n# Somewhere\n", "anchor"),
    ("`spacy-elmo embed in out --no-such-flag`", "no option --no-such-flag"),
    ("```bash\nspacy-elmo pretrain t.txt --output r \\\n    --devise cpu\n```",
     "no option --devise"),
    ("`python -m spacy_elmo embedd in out`", "no such command"),
    ("`torchrun --nproc_per_node 2 -m spacy_elmo pretrain t --max-stepz 3`",
     "no option --max-stepz"),
    ("`spacy train configs/a.cfg --paths.dev d.spacy`", "no setting paths.dev"),
    ("`spacy train configs/a.cfg --nosection.key 1`", "no setting nosection.key"),
    ("`spacy train configs/b.cfg`", "no such file: configs/b.cfg"),
    ("`spacy train configs/a.cfg --outptu x`", "no option --outptu"),
    ("`spacy project run nothing . --vars.data_dir D`", "no such command or workflow"),
    ("`spacy project run all . --vars.date_dir D`", "no variable date_dir"),
    ("Raise it with `--vars.max_stepz 5000`.", "no variable max_stepz"),
    ("`configs/{a,c}.cfg`", "configs/c.cfg"),
    ("`configs/z*.cfg`", "no file matches"),
    ("`scripts/nothing.py`", "no such file"),
    ("`python -m spacy_elmo_lab.nothing IN OUT`", "no lab module spacy_elmo_lab.nothing"),
    ("```ini\n[x]\n@architectures = \"spacy-elmo.ElmoListener.v1\"\ngrad_factr = 1\n```",
     "grad_factr"),
    ("```ini\n[x]\n@architectures = \"spacy-elmo.ElmoListener.v1\"\n\n[x.encoder]\nw = 1\n```",
     "[x.encoder]"),
    ("```python\nx = \"spacy-elmo.ElmoListener.v9\"\n```", "not a registered name"),
    ("```ini\n[components.elmo]\nfactory = \"elmo\"\nstore_layer = true\n```", "store_layer"),
    ("`spacy train data.txt --training.max_steps 5`", "without a config file"),
    ("`spacy-elmo pretrain configs/a.cfg --training.max_stepz 5`", "no setting training.max_stepz"),
    ("`spacy-elmo pretrain C --model.options.lstm_dims 9`", "no setting model.options.lstm_dims"),
    ("[config](configs/a.cfg) outside spaCy's part is relative to docs/", "missing file"),
    ("<!-- WEASEL: AUTO-GENERATED DOCS START (do not remove) -->\n[`project.yml`]"
     "(project.yml), as spaCy writes it\n<!-- WEASEL: AUTO-GENERATED DOCS END (do not "
     "remove) -->\n", "missing file"),  # broken on the page in docs/
]


@pytest.mark.parametrize("markdown", GOOD)
def test_the_checker_accepts_true_docs(tiny_root: Path, markdown: str) -> None:
    assert check_one(tiny_root, markdown) == []


@pytest.mark.parametrize("markdown,expected", BAD)
def test_the_checker_finds_what_does_not_exist(tiny_root: Path, markdown: str,
                                               expected: str) -> None:
    found = check_one(tiny_root, markdown)
    assert len(found) == 1 and expected in found[0], found


def test_the_settings_table_is_checked(tiny_root: Path) -> None:
    table = ("| setting | default |\n|---|---|\n| `store_layers` | false |\n"
             "| `model.batch_size`, `model.bach_size` | 64 |\n| `no_such` | 1 |\n")
    (tiny_root / "docs" / "component.md").write_text(table, encoding="utf8")
    found = problems(tiny_root, [tiny_root / "docs" / "component.md"])
    assert [p.split(": ", 1)[1] for p in found] == [
        "model.bach_size is not a setting of the elmo component",
        "no_such is not a setting of the elmo component"]


@pytest.mark.parametrize("heading,expected", [
    ("The long runs' recipe", "the-long-runs-recipe"),
    ("A private biLM: `ElmoTok2Vec`", "a-private-bilm-elmotok2vec"),
    ("📋 project.yml", "-projectyml"),
    ("Perplexity vs F1: `curve-bundled` and `curve`", "perplexity-vs-f1-curve-bundled-and-curve"),
    ("word2vec rows", "word2vec-rows"),
    ("中文 [link](x.md) text", "中文-link-text"),
])
def test_github_heading_slugs(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("# A\n\n## Notes\n\n## Notes\n\n```\n# not a heading\n```\n", encoding="utf8")
    assert anchors(parse(path)) == {"a", "notes", "notes-1"}
