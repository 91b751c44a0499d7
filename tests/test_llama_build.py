"""llama.cpp's server (test-only, built by `make test-env`) runs on any x86-64 CPU with AVX2: its libraries hold no AMX
and no AVX-512 instruction. A CPU can advertise AMX that its system has not enabled (the first tile instruction then
faults), and ggml's run-time choice among CPU variants reads CPUID alone, so no library may carry AMX at all."""
import importlib.util, os, platform, re, shutil, subprocess
from pathlib import Path
import pytest

AMX = re.compile(r'\s(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdp\w+ps|tdpb[su]{2}d)\s')
AVX512 = re.compile(r'%zmm\d|\{%k[1-7]\}')   # 512-bit registers, or the mask registers of EVEX encodings


def _require(what: str, ok: bool):
    "Skip where a tool is missing, but fail where the environment variable CI is set."
    if ok: return
    if os.environ.get('CI'): pytest.fail(f'{what} is missing, and CI is set', pytrace=False)
    pytest.skip(f'{what} is missing')


def llama_libraries() -> list[Path]:
    "The shared libraries llama-cpp-python loads (ggml's and llama.cpp's)."
    spec = importlib.util.find_spec('llama_cpp')
    _require('llama-cpp-python (make test-env)', spec is not None)
    libs = sorted({p.resolve() for p in (Path(spec.origin).parent/'lib').glob('*.so*') if p.is_file()})
    assert any('ggml-cpu' in p.name or p.name.startswith('libggml.') for p in libs), libs
    return libs


def instructions(lib: Path) -> str:
    "The disassembly of `lib`'s code."
    return subprocess.run(['objdump', '-d', '--no-show-raw-insn', str(lib)], capture_output=True, text=True,
                          check=True).stdout


def test_patterns_find_what_they_look_for():
    "The patterns match real objdump lines (so the test below cannot pass by matching nothing)."
    assert AMX.search('  4011a0:\tldtilecfg (%rax)\n') and AMX.search('  4011b0:\ttdpbssd %tmm2,%tmm1,%tmm0\n')
    assert AMX.search('  4011c0:\ttdpbf16ps %tmm2,%tmm1,%tmm0\n') and not AMX.search('  4011d0:\tvfmadd231ps %ymm1\n')
    assert AVX512.search('vaddps %zmm1,%zmm2,%zmm3') and AVX512.search('vmovups %ymm0,(%rax){%k1}')
    assert not AVX512.search('vaddps %ymm1,%ymm2,%ymm3')


def test_llama_cpp_is_built_for_any_x86_64():
    if platform.machine() not in ('x86_64', 'AMD64'): pytest.skip('an x86-64 build check')
    _require('objdump (Debian binutils)', shutil.which('objdump') is not None)
    found = {}
    for lib in llama_libraries():
        code = instructions(lib)
        assert '>:' in code, f'{lib}: objdump printed no code'
        amx, avx512 = AMX.findall(code), AVX512.findall(code)
        if amx or avx512: found[lib.name] = dict(amx=sorted(set(amx))[:5], avx512=len(avx512))
    assert not found, (f'llama.cpp was built for one CPU, not for any x86-64 one: {found}; '
                       'rebuild it: rm -rf ~/.cache/wordbench/wheels .venv/.wordbench-test-installed && make test-env')


def test_llama_server_is_built_for_any_x86_64():
    "llama.cpp's own `llama-server` (statically linked, from the same source and flags) holds neither."
    from wordbench.bench.servers import llama_server_binary
    if platform.machine() not in ('x86_64', 'AMD64'): pytest.skip('an x86-64 build check')
    _require('objdump (Debian binutils)', shutil.which('objdump') is not None)
    exe = llama_server_binary()
    _require('llama-server (make test-env)', exe is not None)
    code = instructions(Path(exe))
    assert '>:' in code and 'ggml_' in code, f'{exe}: no ggml code in its disassembly'
    amx, avx512 = AMX.findall(code), AVX512.findall(code)
    assert not amx and not avx512, (f'{exe} was built for one CPU: AMX {sorted(set(amx))[:5]}, AVX-512 {len(avx512)}; '
                                    'rebuild it: rm -rf ~/.cache/wordbench/wheels .venv/.wordbench-test-installed '
                                    '&& make test-env')
