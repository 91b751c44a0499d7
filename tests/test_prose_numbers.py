"""Every result number the prose states is printed by code: it occurs, within its printed rounding, in a committed
generated output, or it is in `ALLOWED` with a one-line reason (a version, a setting, a count from a data README).

Prose: README.md, nbs/site/*.md and the Markdown cells of nbs/analysis/*.ipynb. A number is a decimal (`14.5`), a
percentage (`35 %`, `81.06%`) or a count `x of y`; code spans and blocks, link targets and numbers inside a name
(`GPT-3.5`, `ROLE-88`, `top-5`) are not prose numbers. Outputs: figures/**/*.md|csv (not figures/notebooks/),
the report cards under figures/models/*/, data/results/*.json; a system's page and analyses (`probes.md`,
`probes_cloze.ipynb`) are held to that system's outputs (`figures/probes_*`) and the cards, so that another system's
tables cannot vouch for it by coincidence. A decimal or percentage printed with d decimals
matches an output number (or an output proportion times 100) within half a unit of its last digit; `x of y`
matches an output file that holds both numbers.
"""
import bisect, json, re
from pathlib import Path
import numpy as np
import pytest
from wordbench.core import project_root

ROOT = project_root()
NUMBER = re.compile(r'(?<![\w.\-/])(\d[\d,]*(?:\.\d+)?)(\s?%)?(?: of (\d[\d,]*))?(?![\w/]|\.\d|-\w)')
SYSTEMS = ('winodict', 'newterm', 'probes', 'wscplus')
ALLOWED = {  # (file name, number as written): why it needs no generated output
    ('README.md', '3.11'): 'the Python version the project runs on',
    ('your-model.md', '1.55'): "CPU cores the engine used in a timing run of the lm_generation_benchmark analysis",
    ('your-model.md', '2.03'): 'speed-up of one of four reruns of the lm_generation_benchmark analysis (timing)',
    ('your-model.md', '118.4'): 'seconds of a rerun of the lm_generation_benchmark analysis (timing)',
    ('your-model.md', '407.3'): 'seconds of a rerun of the lm_generation_benchmark analysis (timing)',
    ('probes_generation.ipynb', '8.75 %'): "the paper's Appendix B share, which probes_generation.md prints as 8.8",
    ('probes_generation.ipynb', '1.25 %'): "the paper's Appendix B share, which probes_generation.md prints as 1.2",
    ('wscplus.md', '0.59'): 'the similarity an earlier matcher accepted, which the floor now rejects (history)',
    ('at-scale.md', '0.33'): "llama-server's largest log-prob shift under flash attention, measured by hand",
    ('wscplus_dataset.ipynb', '0.59'): 'the same rejected similarity, told as history',
}


def prose(path: Path) -> str:
    "The prose of one file, without code blocks, code spans and link targets."
    if path.suffix == '.ipynb':
        cells = json.loads(path.read_text())['cells']
        text = '\n'.join(''.join(c['source']) for c in cells if c['cell_type'] == 'markdown')
    else: text = path.read_text()
    text = re.sub(r'```.*?```', ' ', text, flags=re.S)
    text = re.sub(r'`[^`\n]*`', ' ', text)
    return re.sub(r'\]\([^)]*\)', ']', text)


def prose_numbers(text: str) -> list[tuple[str, float, int, float | None]]:
    "Each number as written, its value, its decimals, and the `y` of an `x of y` (else None)."
    out = []
    for m in NUMBER.finditer(text):
        raw, pct, of = m.group(1).rstrip(','), m.group(2), m.group(3)
        if not (pct or of or '.' in raw): continue
        digits = len(raw.split('.')[1]) if '.' in raw else 0
        value = float(raw.replace(',', ''))
        out.append((m.group(0).strip(), value, digits, float(of.replace(',', '')) if of else None))
    return out


def output_files() -> list[Path]:
    figs = [p for p in (ROOT/'figures').glob('**/*') if p.suffix in ('.md', '.csv')
            and 'notebooks' not in p.relative_to(ROOT/'figures').parts]
    cards = [p for p in (ROOT/'figures'/'models').glob('*/*') if p.suffix in ('.md', '.csv', '.html')]
    return sorted(set(figs + cards + list((ROOT/'data'/'results').glob('*.json'))))


class Outputs:
    "Every number in the committed outputs, sorted, and the numbers of each output file."
    def __init__(self, files):
        found = re.compile(r'\d[\d,]*(?:\.\d+)?(?:e-?\d+)?')
        self.files, values = [], []
        for p in files:
            text = p.read_text(errors='replace')
            nums = {float(x.replace(',', '')) for x in found.findall(text) if x.replace(',', '').count('.') < 2}
            self.files.append(nums)
            values.extend(nums)
        v = np.unique(np.array(values))
        self.values = np.unique(np.concatenate([v, 100 * v[v <= 1]])).tolist()

    def has(self, value: float, digits: int) -> bool:
        half = 0.5 * 10 ** -digits + 1e-9
        i = bisect.bisect_left(self.values, value - half)
        return i < len(self.values) and self.values[i] <= value + half

    def has_pair(self, x: float, y: float) -> bool: return any(x in s and y in s for s in self.files)


def unprinted(path: Path, out: Outputs) -> list[str]:
    "The numbers of one prose file that no output prints and `ALLOWED` does not list."
    bad = []
    for raw, value, digits, of in prose_numbers(prose(path)):
        if (path.name, raw) in ALLOWED: continue
        ok = out.has_pair(value, of) if of is not None else out.has(value, digits)
        if not ok: bad.append(raw)
    return bad


def system_of(path: Path) -> str | None:
    "The system a prose file belongs to (`probes` for probes.md and probes_cloze.ipynb), else None."
    stem = path.stem.split('_')[0]
    return stem if stem in SYSTEMS else None


@pytest.fixture(scope='module')
def outputs() -> dict:
    "The outputs every prose file is held to: a system's own and the cards, or (key None) all of them."
    files = output_files()
    mine = lambda s: [p for p in files if p.name.startswith(s) or 'models' in p.parts]   # noqa: E731
    return {None: Outputs(files), **{s: Outputs(mine(s)) for s in SYSTEMS}}


def prose_files() -> list[Path]:
    site, analyses = sorted((ROOT/'nbs'/'site').glob('*.md')), sorted((ROOT/'nbs'/'analysis').glob('*.ipynb'))
    return [ROOT/'README.md', *site, *analyses]


def test_extraction_and_matching_on_a_tiny_fixture(tmp_path):
    text = 'GPT-3.5 scores 14.6 on ROLE-1500 (`torch==2.13.0`), 35 % of items, 0 of 7 right; see [x](a/1.5.md).'
    assert [r for r, *_ in prose_numbers(text)] == ['14.6', '35 %', '0 of 7']
    (tmp_path/'t.md').write_text('| model | acc | n |\n| m | 14.52 | 7 |\n| p | 0.354 | 0 |\n')
    out = Outputs([tmp_path/'t.md'])
    assert out.has(14.5, 1) and not out.has(14.6, 1) and out.has(35, 0) and out.has_pair(0, 7)
    assert not out.has_pair(0, 21) and not out.has(2.03, 2)
    (tmp_path/'p.md').write_text(text)
    assert unprinted(tmp_path/'p.md', out) == ['14.6']


@pytest.mark.parametrize('path', prose_files(), ids=lambda p: p.name)
def test_every_prose_number_is_printed_by_code(path, outputs):
    assert unprinted(path, outputs[system_of(path)]) == []


def test_allowlist_is_short_and_used():
    assert len(ALLOWED) <= 40
    for (name, raw), why in ALLOWED.items():
        path = next(p for p in prose_files() if p.name == name)
        assert raw in [r for r, *_ in prose_numbers(prose(path))] and why, (name, raw)
