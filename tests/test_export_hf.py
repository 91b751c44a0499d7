"`wordbench export hf`: every registered export is written and every config loads offline with `datasets`."


def test_every_config_loads(hf_dir):
    import datasets, yaml
    from wordbench.publish.export import HF_EXPORTS
    assert set(HF_EXPORTS) >= {'winodict', 'newterm', 'probes', 'wscplus'}
    for name in HF_EXPORTS:
        card = (hf_dir/name/'README.md').read_text()
        head = yaml.safe_load(card.split('---')[1])
        names = datasets.get_dataset_config_names(str(hf_dir/name))
        assert names == [c['config_name'] for c in head['configs']]
        sizes = {i['config_name']: {s['name']: s['num_examples'] for s in i['splits']} for i in head['dataset_info']}
        for config in names:
            ds = datasets.load_dataset(str(hf_dir/name), config)
            assert {k: len(v) for k, v in ds.items()} == sizes[config], (name, config)
            assert 'id' in ds[next(iter(ds))].column_names
        assert head['license'] and head['task_categories'] and head['size_categories'] and '@' in card


def test_local_only_and_licences(hf_dir):
    import yaml
    for name, local in (('winodict', False), ('newterm', False), ('probes', True), ('wscplus', True)):
        card = (hf_dir/name/'README.md').read_text()
        head = yaml.safe_load(card.split('---')[1])
        assert ('local-use-only' in head['tags']) == local, name
        assert (head['license'] == 'unknown') == local, name


def test_ids_join_results(hf_dir):
    "A results row joins an exported record by its id (and word set for WinoDict)."
    import datasets, pandas as pd
    from wordbench.core import project_root
    res = project_root()/'data'/'results'
    wd = pd.read_csv(res/'winodict_smollm2-135m.csv.gz', usecols=['id', 'bucket', 'word_type'])
    wd = wd[wd.word_type != 'original']
    ex = datasets.load_dataset(str(hf_dir/'winodict'), 'prob3_of_5')['test'].to_pandas()
    sub = wd[wd.bucket == 'prob3_of_5']
    assert len(sub) and sub.id.isin(ex.id).all()
    nt = pd.read_csv(res/'newterm-coma-ll_smollm2-135m.csv.gz', usecols=['id', 'year'], dtype=str)
    ex = pd.concat(datasets.load_dataset(str(hf_dir/'newterm'), f'COMA_{y}_raw')['test'].to_pandas()
                   for y in (2022, 2023))
    assert nt.id.isin(ex.id).all()
    for task, name, config, split in (('probes-cloze', 'probes', None, 'test'), ('wscplus', 'wscplus', 'all', None)):
        r = pd.read_csv(res/f'{task}_smollm2-135m.csv.gz', usecols=['id'], dtype=str)
        d = datasets.load_dataset(str(hf_dir/name), config) if config else None
        ids = (set().union(*(set(s['id']) for s in d.values())) if d else
               set().union(*(set(datasets.load_dataset(str(hf_dir/name), c)['test']['id'])
                             for c in datasets.get_dataset_config_names(str(hf_dir/name)))))
        assert r.id.isin(ids).all(), task
