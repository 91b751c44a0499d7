"""Property-based fuzzing of every raw reader and of `wordbench score`'s input: a malformed JSONL, CSV, TSV, text or
XML file either loads, with one row per record (none silently dropped), or fails with one `DataError` line naming
the file and line (`file:line: ...`), never another exception."""
import csv, io, json, os, re, tempfile, warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from hypothesis import HealthCheck, given, settings, strategies as st
from wordbench.core import DataError
from wordbench.models.score import read_score_requests
from wordbench.winodict.sources import (load_foreign_words, load_morph_rules, load_winodict_words, load_winogrande,
                                        load_wsc)
from wordbench.newterm.sources import load_newterm
from wordbench.probes.sources import load_neg_simp_categories, load_probe, load_probe_predictions
from wordbench.wscplus.sources import WSCPLUS_COLUMNS, WSCPLUS_RESULT_COLUMNS, load_wscplus, load_wscplus_results

# the same 30 examples a reader in every run; FUZZ_EXAMPLES=N draws N fresh ones instead
FUZZ = settings(max_examples=int(os.environ.get('FUZZ_EXAMPLES', 30)), deadline=None,
                derandomize=not os.environ.get('FUZZ_EXAMPLES'),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

TEXT = st.text(st.characters(exclude_categories=('Cs',)), max_size=12)   # any characters, line ends included
JSON_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), TEXT,
                       st.lists(st.text(max_size=4), max_size=5),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def text_variant(draw, line: str) -> bytes:
    "`line` as is, cut, with text inserted, replaced by text or bytes, or blank."
    kind = draw(st.sampled_from(['keep', 'keep', 'cut', 'insert', 'replace', 'bytes', 'blank']))
    i, j = sorted(draw(st.lists(st.integers(0, len(line)), min_size=2, max_size=2)))
    if kind == 'bytes': return draw(st.binary(max_size=12))
    out = {'keep': line, 'cut': line[:i] + line[j:], 'insert': line[:i] + draw(TEXT) + line[i:],
           'replace': draw(TEXT), 'blank': draw(st.sampled_from(['', ' ', '\t', '\r']))}[kind]
    return out.encode('utf-8')


@st.composite
def json_variant(draw, rec: dict) -> bytes:
    "`rec` as JSON with a field dropped or set to any JSON value, or its text mangled."
    kind = draw(st.sampled_from(['keep', 'drop', 'retype', 'text']))
    rec = dict(rec)
    if kind == 'text': return draw(text_variant(json.dumps(rec, ensure_ascii=False)))
    if kind == 'drop': rec.pop(draw(st.sampled_from(sorted(rec))))
    if kind == 'retype': rec[draw(st.sampled_from(sorted(rec)))] = draw(JSON_VALUE)
    return json.dumps(rec, ensure_ascii=False).encode('utf-8')


def lines_file(variant, examples, max_lines=6):
    "A file of up to `max_lines` lines, each a variant of one of `examples`, ended by LF or CRLF."
    line = st.sampled_from(examples).flatmap(variant)
    return st.tuples(st.lists(line, max_size=max_lines), st.sampled_from([b'\n', b'\r\n'])).map(
        lambda t: b''.join(x + t[1] for x in t[0]))


def nonblank_lines(raw: bytes) -> int:
    "Records of a line-based file: its non-blank lines."
    return sum(1 for x in raw.split(b'\n') if x.decode('utf-8').strip())


def all_lines(raw: bytes) -> int:
    "Records of a file where every line is one (a final line end adds none)."
    text = raw.decode('utf-8')
    return len(text.split('\n')) - (text.endswith('\n') or text == '')


def csv_records(raw: bytes) -> int:
    "Records of a CSV file: the non-blank ones after the header."
    rows = list(csv.reader(io.StringIO(raw.decode('utf-8-sig'), newline='')))[1:]
    return sum(1 for r in rows if any(c.strip() for c in r))


def check(load, raw: bytes, count, name='input.txt'):
    "`load(path)` gives `count(raw)` rows, or raises a one-line `DataError` that starts with `path:line: `."
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter('ignore')
        path = Path(d)/name
        path.write_bytes(raw)
        try: n = load(path)
        except DataError as e:
            msg = str(e)
            assert '\n' not in msg and re.match(rf'{re.escape(str(path))}:\d+: \S', msg), msg
            return
        assert n == count(raw), f'{n} rows loaded from {count(raw)} records of {raw!r}'


WINOGRANDE = [dict(qID='q1-1', sentence='The cup fell off _ table.', option1='the', option2='a', answer='1'),
              dict(qID='q1-2', sentence='_ was late.', option1='Ann', option2='Bo', answer=2)]
FOREIGN = [dict(id='f1', sentence='She fed the gato before _ left.', option1='Ann', option2='Bo', answer=1,
                word='gato', surface='gato', pos='NOUN', definition='a cat')]
SCORE = [dict(context='The sky is', continuation=' blue'), dict(prompt='Say hi', max_tokens=3, stop=['\n']),
         dict(messages=[dict(role='user', content='hi')], temperature=0.5, seed=1)]
NEWTERM = {'COMA': dict(term='rizz', meaning='charm', question='He has rizz.', choices=['a', 'b', 'c', 'd'], gold=1,
                        split='cause', type='new words not deduced'),
           'COST': dict(term='rizz', meaning='charm', question='He _ her.', choices=['a', 'b', 'c', 'd'], gold=0,
                        type='new phrases'),
           'CSJ': dict(term='rizz', meaning='charm', question='Is rizz charm?', gold=True, type='new words'),
           'new_terms': dict(term='rizz', meaning='charm', type='new words'),
           'term_generation': dict(term='rizz', meaning='charm', phrases=['a', 'b', 'c', 'd', 'e'])}
FORMS = 'VB:blick,VBD:blicked,VBG:blicking,VBN:blicked,VBZ:blicks,JJ:blicky,NN:blick,NNS:blicks'
WORDS = [f'blick\t-12.5\t{FORMS}', f'florp\t3\t{FORMS}']
RULES = ["VBD(ed:ed,se:sed,re:re'd)", 'VBG(e:ing,ie:ying)', 'NNS(s:ses)', 'JJ()']
PROBES = ['A robin is a bird,', 'A robin is not a tree,', 'The waitress served the customer,']
PREDICTIONS = ["['fish', 'bird']", '["tree", "it\'s"]', '[]']
WSCPLUS = dict(statement='Ann thanked Bo because she helped.', pronoun='she', snippet='she helped',
               options="['Ann', 'Bo']", answer='1', reason='Bo helped.', model='GPT4', type='Traditional')
WSCPLUS_RESULT = dict(WSCPLUS, query='Who helped?', ToE_query='Explain.', predicted_reason='Bo did.',
                      predicted_answer='1', check='same', result='Accurate Predictions')
SCHEMA = ('<schema>\n<text><txt1>Ann thanked Bo because</txt1><pron>she</pron><txt2>had helped.</txt2></text>\n'
          '<answers><answer>Ann</answer><answer>Bo</answer></answers>\n<correctAnswer>B</correctAnswer>\n'
          '<source>toy</source>\n</schema>')


def csv_file(columns, example):
    "A CSV file of `columns` whose records are variants of `example` (a cell mangled, or a whole record)."
    def record(cell_variants):
        out = io.StringIO()
        csv.writer(out, lineterminator='').writerow(cell_variants)
        return out.getvalue()
    cell = lambda c: text_variant(example[c]).map(lambda b: b.decode('utf-8', 'replace'))
    row = st.tuples(*[cell(c) for c in columns]).map(lambda cells: record(cells).encode('utf-8'))
    rows = st.lists(st.one_of(row, text_variant(record([example[c] for c in columns]))), max_size=5)
    return rows.map(lambda rs: b'\n'.join([','.join(columns).encode()] + rs) + b'\n')


@FUZZ
@given(lines_file(json_variant, WINOGRANDE))
def test_winogrande(raw): check(lambda p: len(load_winogrande(path=p, check_labels=False)), raw, nonblank_lines)


@FUZZ
@given(lines_file(json_variant, FOREIGN))
def test_foreign_words(raw): check(lambda p: len(load_foreign_words(p)), raw, nonblank_lines)


@FUZZ
@given(st.sampled_from(sorted(NEWTERM)).flatmap(
    lambda t: st.tuples(st.just(t), lines_file(json_variant, [NEWTERM[t]]))))
def test_newterm(task_raw):
    task, raw = task_raw
    check(lambda p: len(load_newterm(task, path=p)), raw, nonblank_lines)


@FUZZ
@given(lines_file(json_variant, SCORE))
def test_score_input(raw): check(lambda p: len(read_score_requests(p)[1]), raw, nonblank_lines)


@FUZZ
@given(lines_file(text_variant, WORDS))
def test_winodict_words(raw): check(lambda p: len(load_winodict_words(p)), raw, nonblank_lines, 'words.tsv')


@FUZZ
@given(st.permutations(RULES).flatmap(lambda rules: lines_file(text_variant, rules[:1], max_lines=1)),
       lines_file(text_variant, RULES[1:2], max_lines=1))
def test_morph_rules(a, b): check(lambda p: len(load_morph_rules(p)), a + b, nonblank_lines, 'rules.txt')


@FUZZ
@given(lines_file(text_variant, PROBES, max_lines=8))
def test_probes(raw): check(lambda p: len(load_probe('ROLE-toy', path=p)), raw, all_lines)


@FUZZ
@given(lines_file(text_variant, PREDICTIONS))
def test_probe_predictions(raw):
    check(lambda p: len(load_probe_predictions('ROLE-toy', 'm', path=p, fmt='list')), raw, all_lines)


@FUZZ
@given(csv_file(['Category', 'Subcategory'], {'Category': 'bird', 'Subcategory': 'robin, sparrow'}))
def test_neg_simp_categories(raw): check(lambda p: len(load_neg_simp_categories(p)), raw, csv_records, 'c.csv')


@FUZZ
@given(csv_file(WSCPLUS_COLUMNS, WSCPLUS))
def test_wscplus(raw): check(lambda p: len(load_wscplus(p)), raw, csv_records, 'wsc+.csv')


@FUZZ
@given(csv_file(WSCPLUS_RESULT_COLUMNS, WSCPLUS_RESULT))
def test_wscplus_results(raw): check(lambda p: len(load_wscplus_results(path=p)), raw, csv_records, 'r.csv')


def schemas(raw: bytes) -> int: return sum(1 for _ in ET.fromstring(raw).iter('schema'))


@FUZZ
@given(st.lists(text_variant(SCHEMA), max_size=4))
def test_wsc_xml(parts):
    raw = b'<?xml version="1.0" encoding="UTF-8"?>\n<collection>\n' + b'\n'.join(parts) + b'\n</collection>\n'
    check(lambda p: len(load_wsc(p)), raw, schemas, 'wsc.xml')
