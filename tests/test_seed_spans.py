"No tracked file holds a stretch of the seed papers' prose (>= SEED_SPAN characters) that is not dataset text."
import gzip, shutil, subprocess
import pytest
from wordbench.core import project_root
from wordbench.seeds import SEED_SPAN, normalise, seed_copies, seeds_root


def _report(found: dict) -> str:
    return '; '.join(f'{f}: {len(s)} stretch(es), e.g. {s[0][:90]!r}' for f, s in sorted(found.items()))


def test_no_tracked_file_copies_a_paper():
    found = seed_copies()
    assert not found, f'tracked files share >= {SEED_SPAN} characters of paper prose: {_report(found)}'


def _paper_sentence() -> str:
    "A long sentence of a paper that is not data (the first body line of >= 200 characters of the first paper)."
    paper = sorted(seeds_root().glob('*.txt'))[0].read_text(encoding='utf-8')
    return next(l for l in paper.splitlines() if len(l) >= 200 and not l.startswith('|'))[:150]


@pytest.mark.parametrize('name, write', [
    ('notes.md', lambda p, s: p.write_text(f'A note.\n{s}\n')),
    ('results.csv.gz', lambda p, s: p.write_bytes(gzip.compress(f'reply\n"{s}"\n'.encode()))),
    ('nb.ipynb', lambda p, s: p.write_text('{"cells": [{"source": ["' + s.replace('"', '\\"') + '"]}]}'))])
def test_an_inserted_stretch_fails(tmp_path, name, write):
    "A copy of a paper's sentence, written into a checkout's tracked file, is reported; the clean checkout is not."
    repo = tmp_path/'repo'
    repo.mkdir()
    subprocess.run(['git', 'init', '-q'], cwd=repo, check=True)
    shutil.copy(project_root()/'settings.ini', repo/'settings.ini')
    write(repo/name, 'Some words of our own.')
    subprocess.run(['git', 'add', '.'], cwd=repo, check=True)
    assert seed_copies(repo) == {}
    write(repo/name, _paper_sentence())
    found = seed_copies(repo)
    assert list(found) == [name] and found[name][0].strip() in normalise(_paper_sentence())
