"""The prose's result claims, each bound to the output cell it rests on and recomputed from it.

`tests/claims.csv` is the registry, one row per claim:
- `id`: a short name; another claim refers to this one's recomputed value as `@id`.
- `file`: the prose file (README.md, a page of nbs/site/ or a notebook of nbs/analysis/, by file name).
- `phrase`: words of that file's prose, exactly (whitespace aside); the claim fails when the prose no longer holds them.
- `printed`: the number as the phrase writes it (`14.5`, `35 %`, `0 of 7`), or empty for a claim without a number.
- `source`: a committed output under figures/ or data/results/ (CSV, or gzipped CSV), relative to the repository root.
- `row`: a pandas query selecting rows of the source (empty: every row).
- `column`: an expression over the selected rows (`df.eval`: backticks around names with spaces). A plain expression
  needs exactly one row, unless it reduces the rows itself (`gflop.max() / gflop.min()`); `sum(...)`, `mean(...)`,
  `min(...)`, `max(...)` and `count()` aggregate; `A of B` gives two values, for a printed `x of y`.
- `check`: `value` (the recomputed value rounded to the printed decimals is the printed number), or a comparison
  `< B`, `<= B`, `> B`, `>= B`, `= B` or `in [A, B]`, where A and B are numbers, `@id` or `row:EXPR` (an expression on
  the same row).

Coverage: every number in the prose that looks like a result (a decimal, a percentage or an `x of y`) is the
`printed` of a claim whose phrase holds it, or is in `ALLOWED` with a one-line reason. Prose is README.md,
nbs/site/*.md and the Markdown cells of nbs/analysis/*.ipynb, without code blocks and link targets; a phrase may hold
code spans, but no number inside one is a result.
"""
import csv, json, re
from pathlib import Path
import pandas as pd
import pytest
from wordbench.core import project_root

ROOT = project_root()
REGISTRY = Path(__file__).parent/'claims.csv'
NUMBER = re.compile(r'(?<![\w.\-/])(\d[\d,]*(?:\.\d+)?)(\s?%)?(?: of (\d[\d,]*))?(?![\w/]|\.\d|-\w)')
AGGREGATE = re.compile(r'^(sum|mean|min|max|count)\((.*)\)$')
COMPARE = re.compile(r'^(<=|>=|<|>|=)\s*(\S.*)$')
INTERVAL = re.compile(r'^in \[(.+),\s*(.+)\]$')
NOT_RESULTS = {  # a number inside a match of one of these is a setting or a reference, in every prose file
    r'§\s?[A-Z]?\d+(?:\.\d+)*': "a section number of a paper",
    r'CC BY \d\.\d': 'a licence version',
    r'95 ?% (?:Wilson |confidence )?(?:interval|CI)|Wilson (?:\()?95 ?%': "an interval's confidence level (a setting)",
    r'\d+ ?% power': 'the power a minimum detectable effect is computed at (a setting)',
}
ALLOWED = {  # (file name, number as written): why no committed output holds it
    ('README.md', '3.11'): 'the Python version the project runs on',
    ('your-model.md', '1.55'): "CPU cores the engine used in a timing run of the lm_generation_benchmark analysis",
    ('your-model.md', '2.03'): 'speed-up of one of four reruns of the lm_generation_benchmark analysis (timing)',
    ('your-model.md', '118.4'): 'seconds of a rerun of the lm_generation_benchmark analysis (timing)',
    ('your-model.md', '407.3'): 'seconds of a rerun of the lm_generation_benchmark analysis (timing)',
    ('probes_generation.ipynb', '8.75 %'): "the paper's Appendix B share, which probes_generation.md prints as 8.8",
    ('probes_generation.ipynb', '1.25 %'): "the paper's Appendix B share, which probes_generation.md prints as 1.2",
    ('wscplus.md', '0.59'): 'the similarity an earlier matcher accepted, which the floor now rejects (history)',
    ('at-scale.md', '0.33'): "llama-server's largest log-prob shift under flash attention, measured by hand",
    ('main-job.md', '3.67'): "the scored WSC+ grid's speed-up, timed by hand (data/timings/wscplus_scored_fdebbdf.csv)",
    ('main-job.md', '2.90'): "the scored WSC+ grid's speed-up, timed by hand (data/timings/wscplus_scored_fdebbdf.csv)",
    ('wscplus_dataset.ipynb', '0.59'): 'the same rejected similarity, told as history',
}
REASONS = {  # reason: the (file name, number as written) it covers
    'a setting or threshold of the code, not a result': [
        ('at-scale.md', '0.02'), ('main-job.md', '0.8'), ('wscplus.md', '0.8'), ('your-model.md', '90 %'),
        ('your-model.md', '0.05'),
        ('your-model.md', '0.3'), ('your-model.md', '99 %'), ('lm_benchmark.ipynb', '99%'),
        ('newterm_table1.ipynb', '0.05'), ('openai_batching_benchmark.ipynb', '0.9'), ('probes_power.ipynb', '0.8'),
        ('wscplus_dataset.ipynb', '0.8'), ('wscplus_local.ipynb', '90 %'), ('newterm_paper_checks.ipynb', '0.01'),
        ('probes_published.ipynb', '0.1'), ('winodict_table1.ipynb', '0.2'),
    ],
    'chance of a two-way choice, a property of the design': [
        ('winodict_figure2.ipynb', '50%'), ('winodict_table2.ipynb', '50%'), ('winodict_table3.ipynb', '50%'),
    ],
    "a number the paper prints, quoted as the paper's": [
        ('newterm_learned.ipynb', '15%'), ('newterm_variants.ipynb', '2%'), ('probes_generation.ipynb', '87.5 %'),
        ('probes_generation.ipynb', '62.5 %'), ('probes_generation.ipynb', '15 %'),
        ('probes_generation.ipynb', '68 %'), ('probes_generation.ipynb', '32.5 %'),
        ('probes_generation.ipynb', '14.3 %'), ('probes_generation.ipynb', '8.5 %'),
        ('probes_generation.ipynb', '7.4 %'), ('probes_generation.ipynb', '5.3 %'), ('probes_groups.ipynb', '100 %'),
        ('probes_published.ipynb', '100 %'), ('wscplus_generation.ipynb', '49.3 %'),
        ('wscplus_generation.ipynb', '40 %'), ('wscplus_generation.ipynb', '14.7 %'),
        ('wscplus_local.ipynb', '71 %'), ('wscplus_local.ipynb', '68 %'), ('wscplus_local.ipynb', '52 %'),
    ],
    'a measurement by hand or of an earlier run, told as history; no committed output holds it': [
        ('at-scale.md', '2.6'), ('main-job.md', '1.9'), ('main-job.md', '4.8'), ('main-job.md', '71.5'),
        ('main-job.md', '70 %'), ('main-job.md', '12 %'), ('your-model.md', '0.04'),
        ('your-model.md', '0.26'), ('your-model.md', '2.23'), ('your-model.md', '1.94'), ('your-model.md', '60.9'),
        ('your-model.md', '6.69'), ('your-model.md', '1.84'), ('your-model.md', '5.43'), ('your-model.md', '1.97'),
        ('your-model.md', '1.78'), ('your-model.md', '1.35'), ('your-model.md', '3.63'), ('your-model.md', '8.3'),
        ('your-model.md', '8.2'), ('your-model.md', '4.8'),
    ],
    'a package or resource version': [('your-model.md', '2.13'), ('your-model.md', '3.8'), ('your-model.md', '3.0')],
}
ALLOWED |= {key: reason for reason, keys in REASONS.items() for key in keys}


def prose(path: Path) -> str:
    "The prose of one file, without code blocks and link targets, its whitespace runs made one space."
    if path.suffix == '.ipynb':
        cells = json.loads(path.read_text())['cells']
        text = '\n'.join(''.join(c['source']) for c in cells if c['cell_type'] == 'markdown')
    else: text = path.read_text()
    text = re.sub(r'```.*?```', ' ', text, flags=re.S)
    return ' '.join(re.sub(r'\]\([^)]*\)', ']', text).split())


def prose_numbers(text: str) -> list[tuple[str, int]]:
    "Each result-like number (a decimal, a percentage, an `x of y`) outside code spans and NOT_RESULTS, and its start."
    skip = [m.span() for m in re.finditer(r'`[^`]*`', text)]
    skip += [m.span() for pattern in NOT_RESULTS for m in re.finditer(pattern, text)]
    out = []
    for m in NUMBER.finditer(text):
        if any(a <= m.start() < b for a, b in skip): continue
        if m.group(2) or m.group(3) or '.' in m.group(1).rstrip(','): out.append((m.group(0).strip(), m.start()))
    return out


def printed_value(printed: str) -> tuple[float | tuple[float, float], int]:
    "A printed number's value (a pair for `x of y`) and its decimals."
    if ' of ' in printed: return tuple(float(x.replace(',', '')) for x in printed.split(' of ')), 0
    raw = printed.rstrip('% ').replace(',', '')
    return float(raw), len(raw.split('.')[1]) if '.' in raw else 0


def prose_files() -> list[Path]:
    site, analyses = sorted((ROOT/'nbs'/'site').glob('*.md')), sorted((ROOT/'nbs'/'analysis').glob('*.ipynb'))
    return [ROOT/'README.md', *site, *analyses]


def read_registry(path: Path = REGISTRY) -> list[dict]:
    "The registry's claims, one dict per row."
    with open(path, newline='') as f: rows = list(csv.DictReader(f))
    return [{k: (v or '').strip() for k, v in row.items()} for row in rows]


class Checker:
    "Recomputes claims from the outputs under `root`, each source read once."
    def __init__(self, claims: list[dict], root: Path = ROOT):
        self.root, self.claims, self.tables, self.values = root, {c['id']: c for c in claims}, {}, {}

    def table(self, source: str) -> pd.DataFrame:
        if source not in self.tables: self.tables[source] = pd.read_csv(self.root/source)
        return self.tables[source]

    def rows(self, claim: dict) -> pd.DataFrame:
        "The rows a claim selects, each column numeric where all its selected values are (a table stored transposed)."
        df = self.table(claim['source'])
        rows = df.query(claim['row']) if claim['row'] else df
        numeric = {c: pd.to_numeric(rows[c], errors='coerce') for c in rows.columns}
        return rows.assign(**{c: v for c, v in numeric.items() if v.notna().sum() == rows[c].notna().sum()})

    def evaluate(self, rows: pd.DataFrame, expr: str):
        "One value of `expr` over `rows`: an aggregate, a pair (`A of B`) or the single row's value."
        if ' of ' in expr: return tuple(self.evaluate(rows, e) for e in expr.split(' of '))
        if m := AGGREGATE.match(expr):
            how, inner = m.groups()
            return float(len(rows)) if how == 'count' else float(getattr(rows.eval(inner, engine='python'), how)())
        got = rows[expr] if expr in rows.columns else rows.eval(expr, engine='python')
        if not isinstance(got, pd.Series): return float(got)
        if len(got) != 1: raise ValueError(f'{len(rows)} rows selected for {expr!r}, not one')
        return float(got.iloc[0])

    def value(self, claim_id: str):
        "The recomputed value a claim rests on."
        if claim_id not in self.values:
            claim = self.claims[claim_id]
            self.values[claim_id] = self.evaluate(self.rows(claim), claim['column'])
        return self.values[claim_id]

    def operand(self, claim: dict, text: str) -> float:
        text = text.strip()
        if text.startswith('@'): return self.value(text[1:])
        if text.startswith('row:'): return self.evaluate(self.rows(claim), text[4:])
        return printed_value(text)[0]

    def holds(self, claim: dict) -> bool:
        "Whether the claim's check holds for its recomputed value."
        got, check = self.value(claim['id']), claim['check']
        if check == 'value':
            want, digits = printed_value(claim['printed'])
            if isinstance(want, tuple):
                return isinstance(got, tuple) and all(abs(g - w) < 1e-9 for g, w in zip(got, want))
            return abs(got - want) <= 0.5 * 10 ** -digits + 1e-9
        if m := INTERVAL.match(check): return self.operand(claim, m[1]) <= got <= self.operand(claim, m[2])
        op, other = COMPARE.match(check).groups()
        b = self.operand(claim, other)
        return {'<': got < b, '<=': got <= b, '>': got > b, '>=': got >= b, '=': abs(got - b) < 1e-9}[op]

    def failure(self, claim: dict) -> str | None:
        "One line naming a claim that does not hold (or cannot be recomputed), else None."
        where = f"claim {claim['id']} ({claim['file']}: {claim['printed'] or claim['phrase'][:40]!r})"
        try: ok = self.holds(claim)
        except Exception as e: return f"{where}: cannot recompute from {claim['source']}: {e}"
        if ok: return None
        return f"{where} needs {claim['check']}, but {claim['source']} gives {self.value(claim['id'])}"


def phrase_spans(text: str, phrase: str) -> list[tuple[int, int]]:
    "Where a phrase (its whitespace runs made one space) occurs in a prose text."
    phrase = ' '.join(phrase.split())
    return [(m.start(), m.start() + len(phrase)) for m in re.finditer(re.escape(phrase), text)] if phrase else []


def misplaced(claims: list[dict], texts: dict[str, str]) -> list[str]:
    "Claims whose phrase is not in their file's prose, or whose printed number is not in their phrase."
    bad = []
    for c in claims:
        spans = phrase_spans(texts.get(c['file'], ''), c['phrase'])
        if not spans: bad.append(f"claim {c['id']}: {c['file']} no longer says {c['phrase']!r}")
        elif c['printed'] and c['printed'] not in [raw for raw, _ in prose_numbers(' '.join(c['phrase'].split()))]:
            bad.append(f"claim {c['id']}: {c['printed']!r} is not a number of its phrase {c['phrase']!r}")
    return bad


def uncovered(name: str, text: str, claims: list[dict]) -> list[str]:
    "The result-like numbers of one prose file that no claim's phrase holds as its printed number and ALLOWED lacks."
    spans = [(s, e, c['printed']) for c in claims if c['file'] == name and c['printed']
             for s, e in phrase_spans(text, c['phrase'])]
    return [raw for raw, at in prose_numbers(text) if (name, raw) not in ALLOWED
            and not any(s <= at and at + len(raw) <= e and raw == printed for s, e, printed in spans)]


FIXTURE_PROSE = ('Model A scores 14.5 (`v1.2.0`), below the baseline 20.0 (p = 0.03), on 3 of 4 sets; '
                 'see [x](a/1.5.md). GPT-3.5 reached 35 % on ROLE-88.')
FIXTURE_CSV = ('model,set,acc,baseline,p,hit\nA,s1,14.46,20.0,0.031,1\nA,s2,30,20,0.2,1\nA,s3,25,20,0.4,1\n'
               'A,s4,5,20,0.9,0\n')


def fixture_claims(**wrong) -> list[dict]:
    "Claims about FIXTURE_PROSE on FIXTURE_CSV; `wrong` overrides fields of the claim named by its key."
    base = dict(file='page.md', source='t.csv')
    claims = [dict(base, id='acc', phrase='Model A scores 14.5', printed='14.5', row="model == 'A' and set == 's1'",
                   column='acc', check='value'),
              dict(base, id='below', phrase='below the baseline 20.0', printed='20.0', row="set == 's1'",
                   column='baseline', check='> @acc'),
              dict(base, id='p', phrase='(p = 0.03)', printed='0.03', row="set == 's1'", column='p', check='value'),
              dict(base, id='sets', phrase='on 3 of 4 sets', printed='3 of 4', row='', column='sum(hit) of count()',
                   check='value'),
              dict(base, id='gpt', phrase='reached 35 %', printed='35 %', row="set == 's2'", column='acc + 5',
                   check='in [30, 40]')]
    return [dict(c, **wrong.get(c['id'], {})) for c in claims]


def test_extraction_on_a_tiny_fixture(tmp_path):
    (tmp_path/'page.md').write_text(FIXTURE_PROSE + '\n```\n9.9 in code\n```\n')
    text = prose(tmp_path/'page.md')
    assert [raw for raw, _ in prose_numbers(text)] == ['14.5', '20.0', '0.03', '3 of 4', '35 %']
    assert printed_value('3 of 4') == ((3.0, 4.0), 0) and printed_value('1,234.50 %') == (1234.5, 2)


def test_true_claims_hold_and_cover_the_fixture(tmp_path):
    (tmp_path/'t.csv').write_text(FIXTURE_CSV)
    text, claims = ' '.join(FIXTURE_PROSE.split()), fixture_claims()
    checker = Checker(claims, tmp_path)
    assert [checker.failure(c) for c in claims] == [None] * len(claims)
    assert misplaced(claims, {'page.md': prose_of(FIXTURE_PROSE)}) == [] and uncovered('page.md', text, claims) == []
    assert uncovered('page.md', text, claims[1:]) == ['14.5'] and uncovered('other.md', text, claims) != []


def prose_of(text: str) -> str: return ' '.join(re.sub(r'\]\([^)]*\)', ']', text).split())


@pytest.mark.parametrize('claim_id,wrong,message', [
    ('acc', dict(printed='14.6', phrase='Model A scores 14.6'), 'needs value, but t.csv gives 14.46'),
    ('below', dict(check='< @acc'), 'needs < @acc, but t.csv gives 20.0'),
    ('p', dict(check='< 0.03'), 'needs < 0.03, but t.csv gives 0.031'),
    ('sets', dict(printed='4 of 4', phrase='on 4 of 4 sets'), 'needs value, but t.csv gives (3.0, 4.0)'),
    ('gpt', dict(check='in [20, 30]'), 'needs in [20, 30], but t.csv gives 35.0'),
    ('p', dict(row="model == 'A'"), 'cannot recompute from t.csv: 4 rows selected'),
])
def test_a_false_claim_fails_naming_itself(tmp_path, claim_id, wrong, message):
    (tmp_path/'t.csv').write_text(FIXTURE_CSV)
    claims = fixture_claims(**{claim_id: wrong})
    checker = Checker(claims, tmp_path)
    failures = [f for c in claims if (f := checker.failure(c))]
    assert len(failures) == 1 and failures[0].startswith(f'claim {claim_id} (page.md:') and message in failures[0]


def test_a_claim_whose_phrase_left_the_prose_fails():
    claims = fixture_claims(acc=dict(phrase='Model A scores 14.7', printed='14.7'))
    assert misplaced(claims, {'page.md': prose_of(FIXTURE_PROSE)}) == [
        "claim acc: page.md no longer says 'Model A scores 14.7'"]
    assert misplaced(fixture_claims(p=dict(printed='0.3')), {'page.md': prose_of(FIXTURE_PROSE)})[0].startswith(
        "claim p: '0.3' is not a number of its phrase")


@pytest.fixture(scope='module')
def registry() -> list[dict]: return read_registry()


@pytest.fixture(scope='module')
def texts() -> dict[str, str]: return {p.name: prose(p) for p in prose_files()}


def test_registry_is_well_formed(registry):
    ids = [c['id'] for c in registry]
    assert len(ids) == len(set(ids)), 'claim ids repeat'
    for c in registry:
        assert c['source'].startswith(('figures/', 'data/results/')) and (ROOT/c['source']).exists(), c['id']
        assert c['check'] == 'value' or COMPARE.match(c['check']) or INTERVAL.match(c['check']), c['id']
        assert c['check'] != 'value' or c['printed'], f"claim {c['id']}: a value check needs its printed number"


def test_every_claim_is_in_the_prose(registry, texts):
    bad = misplaced(registry, texts)
    assert not bad, '\n'.join(bad)


def test_every_claim_holds(registry):
    checker = Checker(registry)
    failures = [f for c in registry if (f := checker.failure(c))]
    assert not failures, '\n'.join(failures)


@pytest.mark.parametrize('path', prose_files(), ids=lambda p: p.name)
def test_every_result_number_is_claimed_or_allowed(path, registry, texts):
    bad = uncovered(path.name, texts[path.name], registry)
    assert not bad, f'{path.name}: numbers neither claimed in tests/claims.csv nor ALLOWED: {bad}'


def test_allowlist_is_short_and_used(texts):
    assert len(ALLOWED) <= 80
    for (name, raw), why in ALLOWED.items():
        assert raw in [r for r, _ in prose_numbers(texts[name])] and why, (name, raw)
