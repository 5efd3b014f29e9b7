"""The layer cache: round trips, layer handling, LRU, persistence across processes, damage, full disk."""

from __future__ import annotations

import errno
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo_mix.cache import LayerCache, LayerCacheWarning, model_fingerprint
from spacy_elmo_mix.cache import disk as disk_module

FINGERPRINT = "0123456789abcdef" * 2
WIDTH = 16
SENTENCES = [["The", "cat", "sat", "."], ["Hello"], ["a", "b", "c", "d", "e", "f"], []]


def fake_layers(rng: np.random.Generator, n_tokens: int, n_layers: int = 3, width: int = WIDTH) -> np.ndarray:
    """ELMo-shaped layers: layer 0 is a token vector written twice."""
    layers = rng.standard_normal((n_layers, n_tokens, width)).astype(np.float32)
    layers[0, :, width // 2 :] = layers[0, :, : width // 2]
    return layers


def make_cache(directory, **kwargs) -> LayerCache:
    kwargs.setdefault("fingerprint", FINGERPRINT)
    kwargs.setdefault("refresh_seconds", 0.0)
    return LayerCache(directory, n_layers_total=3, width=WIDTH, **kwargs)


def filled(directory, dtype="float32", seed=0, **kwargs):
    """A cache holding all three layers of SENTENCES, and those layers."""
    rng = np.random.default_rng(seed)
    layers = [fake_layers(rng, len(s)) for s in SENTENCES]
    cache = make_cache(directory, dtype=dtype, **kwargs)
    cache.put_many(SENTENCES, layers)
    return cache, layers


def shard(cache: LayerCache, kind: str = "bin") -> Path:
    return cache.path / f"shard-000001.{kind}"


def caught(function):
    """Run ``function``; return its result and the LayerCacheWarnings it issued."""
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        result = function()
    return result, [w for w in issued if issubclass(w.category, LayerCacheWarning)]


# ----------------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("on_disk", [False, True])
def test_round_trip_float32_is_exact(tmp_path, on_disk):
    cache, layers = filled(tmp_path if on_disk else None, dtype="float32")
    reader = make_cache(tmp_path, dtype="float32", memory_bytes=0) if on_disk else cache
    for tokens, expected in zip(SENTENCES, layers):
        got = reader.get(tokens)
        assert got.dtype == np.float32 and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("on_disk", [False, True])
def test_round_trip_float16_within_rounding(tmp_path, on_disk):
    cache, layers = filled(tmp_path if on_disk else None, dtype="float16")
    reader = make_cache(tmp_path, dtype="float16", memory_bytes=0) if on_disk else cache
    for tokens, expected in zip(SENTENCES, layers):
        got = reader.get(tokens, top_layer=2)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-6)


def test_memory_and_disk_tiers_return_the_same_vectors(tmp_path):
    cache, _ = filled(tmp_path, dtype="float16")
    disk_only = make_cache(tmp_path, dtype="float16", memory_bytes=0)
    for tokens in SENTENCES:
        np.testing.assert_array_equal(cache.get(tokens), disk_only.get(tokens))
    assert cache.stats.memory_hits == len(SENTENCES) and disk_only.stats.disk_hits == len(SENTENCES)


def test_layer_zero_is_stored_once(tmp_path):
    cache, layers = filled(tmp_path, dtype="float32")
    n_tokens = sum(len(s) for s in SENTENCES)
    assert shard(cache).stat().st_size == n_tokens * (WIDTH // 2 + 2 * WIDTH) * 4
    got = make_cache(tmp_path, dtype="float32", memory_bytes=0).get(SENTENCES[0], top_layer=0)
    np.testing.assert_array_equal(got[0, :, : WIDTH // 2], got[0, :, WIDTH // 2 :])
    np.testing.assert_array_equal(got[0], layers[0][0])


def test_layer_zero_that_is_not_a_token_layer_is_refused():
    layers = np.random.default_rng(0).standard_normal((2, 3, WIDTH)).astype(np.float32)
    with pytest.raises(ValueError, match="layer 0"):
        make_cache(None).put(["a", "b", "c"], layers)


def test_bad_arguments_are_refused():
    cache = make_cache(None)
    with pytest.raises(TypeError, match="list of tokens"):
        cache.get("a sentence")
    with pytest.raises(ValueError, match="top_layer"):
        cache.get(["a"], top_layer=3)
    with pytest.raises(ValueError, match="layers must be"):
        cache.put(["a", "b"], fake_layers(np.random.default_rng(0), 3))
    with pytest.raises(ValueError, match="dtype"):
        make_cache(None, dtype="bfloat16")


# ----------------------------------------------------------------------------------- which layers
@pytest.mark.parametrize("on_disk", [False, True])
def test_fewer_layers_are_served_more_layers_miss_then_replace(tmp_path, on_disk):
    directory = tmp_path if on_disk else None
    rng = np.random.default_rng(1)
    tokens, full = ["x", "y"], fake_layers(rng, 2)
    cache = make_cache(directory, dtype="float32")
    cache.put(tokens, full[:2])
    np.testing.assert_array_equal(cache.get(tokens, top_layer=0), full[:1])
    np.testing.assert_array_equal(cache.get(tokens, top_layer=1), full[:2])
    assert cache.get(tokens, top_layer=2) is None
    cache.put(tokens, full)
    reader = make_cache(directory, dtype="float32", memory_bytes=0) if on_disk else cache
    np.testing.assert_array_equal(reader.get(tokens, top_layer=2), full)
    np.testing.assert_array_equal(reader.get(tokens, top_layer=1), full[:2])


def test_putting_fewer_layers_keeps_the_fuller_entry(tmp_path):
    full = fake_layers(np.random.default_rng(2), 2)
    cache = make_cache(tmp_path, dtype="float32")
    cache.put(["x", "y"], full)
    cache.put(["x", "y"], full[:1])
    assert cache.stats.disk_writes == 1
    np.testing.assert_array_equal(make_cache(tmp_path, dtype="float32").get(["x", "y"]), full)


def test_get_or_compute_computes_only_the_misses(tmp_path):
    rng = np.random.default_rng(3)
    computed_for = []

    def compute(sentences):
        computed_for.append(sentences)
        return [fake_layers(rng, len(s)) for s in sentences]

    cache = make_cache(tmp_path)
    first = cache.get_or_compute(SENTENCES[:2], 1, compute)
    second = cache.get_or_compute(SENTENCES[:3], 1, compute)
    assert computed_for == [SENTENCES[:2], SENTENCES[2:3]]
    assert [a.shape[0] for a in second] == [2, 2, 2]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)  # a miss returns the stored (float16) values, like a hit


# ----------------------------------------------------------------------------------- keys
def test_a_different_fingerprint_never_hits(tmp_path):
    cache, _ = filled(tmp_path)
    other = make_cache(tmp_path, fingerprint="fedcba9876543210" * 2)
    assert other.get_many(SENTENCES) == [None] * len(SENTENCES)
    assert make_cache(tmp_path, dtype="float16").get(SENTENCES[0]) is None  # other dtype, other entries


def test_keys_are_the_exact_token_sequence():
    cache, _ = filled(None)
    assert cache.get(["The cat", "sat", "."]) is None
    assert cache.get(["the", "cat", "sat", "."]) is None
    assert cache.get(["The", "cat", "sat", ".", ""]) is None
    assert cache.get(["The", "cat", "sat", "."]) is not None


def test_lru_eviction_under_the_byte_budget():
    rng = np.random.default_rng(4)
    entry_bytes = 4 * (WIDTH // 2 + 2 * WIDTH) * 2  # 4 tokens, float16
    cache = make_cache(None, memory_bytes=2 * entry_bytes)
    sentences = [[f"w{i}"] * 4 for i in range(3)]
    cache.put(sentences[0], fake_layers(rng, 4))
    cache.put(sentences[1], fake_layers(rng, 4))
    assert cache.get(sentences[0]) is not None  # 0 is now the most recently used
    cache.put(sentences[2], fake_layers(rng, 4))
    assert [cache.get(s) is not None for s in sentences] == [True, False, True]
    assert cache.stats.memory_bytes == 2 * entry_bytes and cache.stats.memory_entries == 2


# ----------------------------------------------------------------------------------- sharing
CHILD_READ = """
import sys, numpy as np
from spacy_elmo_mix.cache import LayerCache
cache = LayerCache(sys.argv[1], sys.argv[2], n_layers_total=3, width=int(sys.argv[3]), dtype="float32")
sentences = [s.split(" ") if s else [] for s in sys.argv[4].split("|")]
np.savez(sys.argv[5], *cache.get_many(sentences))
"""

CHILD_WRITE = """
import sys, numpy as np
from spacy_elmo_mix.cache import LayerCache
cache = LayerCache(sys.argv[1], sys.argv[2], n_layers_total=3, width=int(sys.argv[3]), dtype="float32")
rng = np.random.default_rng(int(sys.argv[4]))
for batch in range(10):
    sentences = [[f"p{sys.argv[4]}", f"b{batch}", f"s{i}"] for i in range(5)]
    layers = rng.standard_normal((5, 3, 3, int(sys.argv[3]))).astype(np.float32)
    layers[:, 0, :, int(sys.argv[3]) // 2 :] = layers[:, 0, :, : int(sys.argv[3]) // 2]
    cache.put_many(sentences, list(layers))
"""


def test_another_process_reads_the_cache(tmp_path):
    _, layers = filled(tmp_path / "cache")
    sentences = "|".join(" ".join(s) for s in SENTENCES)
    out = tmp_path / "child.npz"
    args = [str(tmp_path / "cache"), FINGERPRINT, str(WIDTH), sentences, str(out)]
    subprocess.run([sys.executable, "-c", CHILD_READ, *args], check=True)
    with np.load(out) as child:
        for i, expected in enumerate(layers):
            np.testing.assert_array_equal(child[f"arr_{i}"], expected)


def test_concurrent_writers_lose_nothing(tmp_path):
    reader = make_cache(tmp_path, dtype="float32")  # opened before anything is written
    args = [str(tmp_path), FINGERPRINT, str(WIDTH)]
    children = [subprocess.Popen([sys.executable, "-c", CHILD_WRITE, *args, str(seed)]) for seed in (1, 2)]
    assert [child.wait() for child in children] == [0, 0]
    sentences = [[f"p{seed}", f"b{batch}", f"s{i}"] for seed in (1, 2) for batch in range(10) for i in range(5)]
    found = reader.get_many(sentences)
    assert all(layers is not None and layers.shape == (3, 3, WIDTH) for layers in found)
    assert reader.stats.disk_entries == 100 and not list(tmp_path.rglob("*.tmp"))


def test_new_shards_are_started_and_the_newest_copy_wins(tmp_path):
    from spacy_elmo_mix.cache.disk import DiskTier, NewEntry
    from spacy_elmo_mix.cache.payload import encode

    rng = np.random.default_rng(7)
    tier = DiskTier(tmp_path, WIDTH, 3, "float32", max_shard_entries=2)
    entries = [NewEntry(bytes([i]) * 16, 2, 3, encode(fake_layers(rng, 2), np.dtype(np.float32))) for i in range(5)]
    for entry in entries:
        assert tier.put_many([entry]) == 1
    assert sorted(p.name for p in tmp_path.glob("*.idx")) == [f"shard-00000{i}.idx" for i in (1, 2, 3)]
    flip_byte(tmp_path / "shard-000001.bin", 3)
    assert caught(lambda: tier.get(entries[0].key, 3))[0] is None
    assert tier.put_many([entries[0]]) == 1  # the damaged entry is written again, into shard 3
    fresh = DiskTier(tmp_path, WIDTH, 3, "float32")
    for entry in entries:
        np.testing.assert_array_equal(fresh.get(entry.key, 3), entry.flat)


# ----------------------------------------------------------------------------------- damage
def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupted_shard_byte_is_a_miss_reported_once(tmp_path):
    cache, layers = filled(tmp_path)
    flip_byte(shard(cache), 5)  # inside the first entry
    flip_byte(shard(cache), shard(cache).stat().st_size - 1)  # inside the third (the fourth is empty)
    reader = make_cache(tmp_path, dtype="float32", memory_bytes=0)
    found, issued = caught(lambda: reader.get_many(SENTENCES))
    assert [f is None for f in found] == [True, False, True, False]
    assert len(issued) == 1 and "shard-000001.bin" in str(issued[0].message)
    assert reader.stats.corrupt_entries == 2
    reader.put_many([SENTENCES[0], SENTENCES[2]], [layers[0], layers[2]])  # recomputed
    for i in (0, 2):
        fresh = make_cache(tmp_path, dtype="float32", memory_bytes=0).get(SENTENCES[i])
        np.testing.assert_array_equal(fresh, layers[i])


def test_only_the_layers_read_are_checked(tmp_path):
    cache, layers = filled(tmp_path)
    n = len(SENTENCES[0])
    flip_byte(shard(cache), 4 * (n * WIDTH // 2 + n * WIDTH) + 3)  # layer 2 of the first entry
    reader = make_cache(tmp_path, dtype="float32", memory_bytes=0)
    np.testing.assert_array_equal(reader.get(SENTENCES[0], top_layer=1), layers[0][:2])
    assert caught(lambda: reader.get(SENTENCES[0], top_layer=2))[0] is None


def test_a_truncated_shard_is_a_miss(tmp_path):
    cache, layers = filled(tmp_path)
    path = shard(cache)
    first_entry = len(SENTENCES[0]) * (WIDTH // 2 + 2 * WIDTH) * 4
    path.write_bytes(path.read_bytes()[: first_entry + 60])
    reader = make_cache(tmp_path, dtype="float32", memory_bytes=0)
    found, issued = caught(lambda: reader.get_many(SENTENCES))
    assert [f is None for f in found] == [False, True, True, False]
    assert len(issued) == 1 and "truncated" in str(issued[0].message)
    reader.put_many(SENTENCES[1:3], layers[1:3])
    fresh = make_cache(tmp_path, dtype="float32", memory_bytes=0)
    for tokens, expected in zip(SENTENCES, layers):
        np.testing.assert_array_equal(fresh.get(tokens), expected)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_index_is_reported_and_repaired(tmp_path, damage):
    cache, layers = filled(tmp_path)
    index = shard(cache, "idx")
    data = index.read_bytes()
    index.write_bytes({"truncate": data[: len(data) - 7], "garbage": b"\x13" * len(data), "empty": b""}[damage])
    reader, issued = caught(lambda: make_cache(tmp_path, dtype="float32", memory_bytes=0))
    assert len(issued) == 1 and "shard-000001.idx" in str(issued[0].message)
    assert reader.get_many(SENTENCES) == [None] * len(SENTENCES)
    reader.put_many(SENTENCES, layers)  # the writer resets the damaged shard and rewrites the entries
    fresh, issued = caught(lambda: make_cache(tmp_path, dtype="float32", memory_bytes=0))
    assert not issued
    for tokens, expected in zip(SENTENCES, layers):
        np.testing.assert_array_equal(fresh.get(tokens), expected)


@pytest.mark.parametrize("failing", ["_write_all", "write_index"])
def test_a_full_disk_warns_and_keeps_the_cache_valid(tmp_path, monkeypatch, failing):
    cache, layers = filled(tmp_path)
    size_before, index_before = shard(cache).stat().st_size, shard(cache, "idx").read_bytes()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(shard(cache)))

    monkeypatch.setattr(disk_module, failing, full)
    new_tokens, new_layers = ["brand", "new"], fake_layers(np.random.default_rng(5), 2)
    _, issued = caught(lambda: cache.put(new_tokens, new_layers))
    assert len(issued) == 1 and "disk is full" in str(issued[0].message)
    assert "disk is full" in cache.disk_error and "stay valid" in cache.disk_error
    np.testing.assert_array_equal(cache.get(new_tokens), new_layers)  # kept in memory
    assert caught(lambda: cache.put(["more"], new_layers[:, :1]))[1] == []  # no second attempt, no warning
    monkeypatch.undo()
    assert shard(cache).stat().st_size == size_before and shard(cache, "idx").read_bytes() == index_before
    fresh = make_cache(tmp_path, dtype="float32", memory_bytes=0)
    for tokens, expected in zip(SENTENCES, layers):
        np.testing.assert_array_equal(fresh.get(tokens), expected)
    assert fresh.get(new_tokens) is None


def test_disk_bytes_per_token_for_the_full_size_model(tmp_path):
    rng = np.random.default_rng(6)
    sentences = [[f"t{i}_{j}" for j in range(int(n))] for i, n in enumerate(rng.integers(5, 40, size=40))]
    layers = [fake_layers(rng, len(s), width=1024) for s in sentences]
    cache = LayerCache(tmp_path, FINGERPRINT, n_layers_total=3, width=1024, dtype="float16")
    cache.put_many(sentences[:20], layers[:20])
    cache.put_many(sentences[20:], layers[20:])
    on_disk = sum(path.stat().st_size for path in cache.path.iterdir())
    per_token = on_disk / sum(len(s) for s in sentences)
    assert 5120 <= per_token <= 5 * 1024 * 1.01, per_token


# ----------------------------------------------------------------------------------- a real model
def tiny_sentences():
    return [
        ["The", "cat", "sat", "on", "the", "mat", "."],
        ["ELMo", "vectors", "are", "contextual"],
        ["Hello"],
        ["A", "longer", "sentence", ",", "with", "punctuation", "and", "numbers", "like", "1984", "."],
    ]


@pytest.fixture(scope="module")
def embedder(tiny_model_files):
    from spacy_elmo_mix.bilm import ElmoEmbedder

    return ElmoEmbedder(*tiny_model_files)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cached_layers_of_the_tiny_model_match_the_computed_ones(tmp_path, embedder, dtype):
    sentences = tiny_sentences()
    computed = embedder.embed_batch(sentences)
    cache = LayerCache.for_model(embedder.model, tmp_path, dtype=dtype)
    cache.put_many(sentences, computed)
    reader = LayerCache.for_model(embedder.model, tmp_path, dtype=dtype, memory_bytes=0)
    for tokens, expected in zip(sentences, computed):
        got = reader.get(tokens)
        if dtype == "float32":
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)
    assert reader.stats.disk_hits == len(sentences)


def test_get_or_compute_with_the_tiny_model_computes_only_top_layers_asked(embedder):
    cache = LayerCache.for_model(embedder.model, None, dtype="float32")
    sentences = tiny_sentences()
    compute = lambda batch: embedder.embed_batch(batch, top_layer=1)  # noqa: E731
    first = cache.get_or_compute(sentences, 1, compute)
    again = cache.get_or_compute(sentences, 1, lambda batch: pytest.fail("recomputed a cached sentence"))
    for a, b, expected in zip(first, again, embedder.embed_batch(sentences)):
        np.testing.assert_array_equal(a, expected[:2])
        np.testing.assert_array_equal(b, expected[:2])
    assert cache.get(sentences[0], top_layer=2) is None


def test_model_fingerprint_changes_with_one_weight(tiny_model_files):
    import torch

    from spacy_elmo_mix.bilm import load_bilm

    first, second = load_bilm(*tiny_model_files), load_bilm(*tiny_model_files)
    assert model_fingerprint(first) == model_fingerprint(second)
    with torch.no_grad():
        second.stacks[1][0].w_projection[3, 5] += 1e-6
    assert model_fingerprint(first) != model_fingerprint(second)
    assert model_fingerprint(first) != model_fingerprint(first, extra="bfloat16")


# ----------------------------------------------------------------------------------- corpora
def test_cache_command_fills_the_cache_once(tmp_path, tiny_model_files, capsys):
    import spacy
    from spacy.tokens import DocBin

    from spacy_elmo_mix.bilm import ElmoEmbedder
    from spacy_elmo_mix.cli.cache import main

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    texts = ["The cat sat on the mat. It was happy.", "Hello world!", "The cat sat on the mat."]
    DocBin(docs=[nlp(t) for t in texts]).to_disk(tmp_path / "train.spacy")
    options, weights = map(str, tiny_model_files)
    argv = ["--options", options, "--weights", weights, "--cache-dir", str(tmp_path / "cache"), "--top-layer", "1"]
    argv.append("--gold-preproc")  # the stored sentences (as a config with gold_preproc = true reads them)
    assert main(argv + [str(tmp_path / "train.spacy")]) == 0
    out = capsys.readouterr().out
    assert "3 distinct sentences" in out and "0 already cached, 3 computed" in out
    assert main(argv + [str(tmp_path / "train.spacy")]) == 0
    assert "3 already cached, 0 computed" in capsys.readouterr().out
    embedder = ElmoEmbedder(options, weights)
    cache = LayerCache.for_model(embedder.model, tmp_path / "cache", dtype="float32")  # the command's default
    expected = embedder.embed_sentence(["It", "was", "happy", "."], top_layer=1)
    np.testing.assert_allclose(cache.get(["It", "was", "happy", "."], top_layer=1), expected, rtol=1e-3, atol=1e-4)
    assert cache.get(["It", "was", "happy", "."], top_layer=2) is None
    assert main(argv + [str(tmp_path / "missing.spacy")]) == 1
    assert "missing.spacy" in capsys.readouterr().err
