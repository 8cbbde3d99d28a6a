"""Cryptographically secure randomness for the release: AES-256-CTR keystreams from OS entropy.

The noise of a release must be unpredictable to whoever holds other records of it: a generator
such as SFC64 or PCG64 is not (its state can in principle be recovered from outputs).  The
keystream of AES-256 in counter mode (``cryptography``, i.e. OpenSSL with AES-NI: gigabytes a
second) is.

- :meth:`NoiseKey.from_os_entropy` draws a 256-bit key from ``os.urandom`` -- what a real release
  uses.  :meth:`NoiseKey.from_seed` derives the key from a user seed (SHA-256): for simulations
  only, since anyone who knows the seed can regenerate the noise.  Such keys are ``seeded``.
- :meth:`NoiseKey.derive` gives an independent child key (HMAC-SHA256 of the key and a path of
  strings/integers): the parts of a multi-part release each get their own key.
- :meth:`NoiseKey.stream` gives keystream number ``stream_id`` of a key: the AES-CTR counter
  block is ``stream_id`` (high 64 bits) followed by the block counter (low 64 bits), so distinct
  stream ids never share a counter block (each stream has 2^64 blocks of 16 bytes).

Nothing about a key is ever written to a release.
"""
from __future__ import annotations

import hashlib
import hmac
import os

import numpy as np

from ..exceptions import InvalidInputError

_SEED_DOMAIN = b"iwpfast.noise.seed.v1\0"


class NoiseKey:
    """A 256-bit AES key for the noise of one release (or one part of it)."""

    __slots__ = ("_key", "seeded")

    def __init__(self, key: bytes, seeded: bool):
        if not isinstance(key, bytes) or len(key) != 32:
            raise InvalidInputError("a NoiseKey needs 32 bytes; use NoiseKey.from_os_entropy()")
        self._key = key
        self.seeded = bool(seeded)

    def __repr__(self) -> str:  # never show the key
        return f"NoiseKey(seeded={self.seeded})"

    @classmethod
    def from_os_entropy(cls) -> NoiseKey:
        """A fresh key from the operating system's CSPRNG (a real release)."""
        return cls(os.urandom(32), seeded=False)

    @classmethod
    def from_seed(cls, seed) -> NoiseKey:
        """A key derived from a user seed (an int >= 0, bytes/str, or a ``numpy.random.SeedSequence``):
        simulations only."""
        if isinstance(seed, (bool, np.bool_)):
            raise InvalidInputError(f"seed must be an integer >= 0 or bytes, got {seed!r}")
        if isinstance(seed, (int, np.integer)):
            if seed < 0:
                raise InvalidInputError(f"seed must be an integer >= 0, got {seed}")
            material = int(seed).to_bytes((int(seed).bit_length() + 8) // 8, "little")
            material = b"int:" + material
        elif isinstance(seed, np.random.SeedSequence):
            # a SeedSequence (e.g. one spawned per part): its entropy and spawn key define the key
            entropy = seed.entropy if isinstance(seed.entropy, (list, tuple)) else [seed.entropy]
            material = b"seedseq:" + repr((tuple(int(e) for e in entropy),  # type: ignore[arg-type]
                                           tuple(int(k) for k in seed.spawn_key))).encode()
        elif isinstance(seed, (bytes, str)):
            material = b"bytes:" + (seed.encode() if isinstance(seed, str) else seed)
        else:
            raise InvalidInputError(
                f"seed must be None (fresh OS entropy), an integer >= 0, bytes, a SeedSequence or a "
                f"NoiseKey, got "
                f"{type(seed).__name__}")
        return cls(hashlib.sha256(_SEED_DOMAIN + material).digest(), seeded=True)

    @classmethod
    def coerce(cls, seed) -> NoiseKey:
        """``None`` -> fresh OS entropy; a NoiseKey as is; anything else -> :meth:`from_seed`."""
        if seed is None:
            return cls.from_os_entropy()
        if isinstance(seed, NoiseKey):
            return seed
        return cls.from_seed(seed)

    def derive(self, *path) -> NoiseKey:
        """An independent child key for ``path`` (strings and integers), e.g. ``("part", 3)``."""
        parts = []
        for item in path:
            if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                parts.append(b"i" + str(int(item)).encode())
            elif isinstance(item, str):
                parts.append(b"s" + item.encode())
            else:
                raise InvalidInputError(f"derive() takes strings and integers, got {item!r}")
        label = b"\0".join(parts)
        return NoiseKey(hmac.new(self._key, b"iwpfast.derive\0" + label, hashlib.sha256).digest(),
                        self.seeded)

    def stream(self, stream_id: int) -> KeyStream:
        """Keystream number ``stream_id`` (0 <= id < 2^64) of this key."""
        return KeyStream(self._key, stream_id)


_ZEROS = np.zeros(0, dtype=np.uint8)


def _zeros(nbytes: int) -> np.ndarray:
    """A shared read-only buffer of zero bytes (the plaintext whose encryption is the keystream):
    allocated once per process and grown when needed, instead of per stream (fresh zero pages
    cost a page fault each)."""
    global _ZEROS
    if _ZEROS.size < nbytes:
        grown = np.zeros(max(nbytes, 1 << 18), dtype=np.uint8)
        grown.flags.writeable = False
        _ZEROS = grown
    return _ZEROS


class KeyStream:
    """The AES-256-CTR keystream of one (key, stream id), read in 64-bit words."""

    __slots__ = ("_encryptor",)

    def __init__(self, key: bytes, stream_id: int):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        stream_id = int(stream_id)
        if not 0 <= stream_id < 1 << 64:
            raise InvalidInputError(f"stream_id must be in [0, 2^64), got {stream_id}")
        counter_block = stream_id.to_bytes(8, "big") + bytes(8)
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(counter_block)).encryptor()

    def fill(self, out: np.ndarray) -> np.ndarray:
        """Fill a C-contiguous uint64 array with the next ``out.size`` words of the stream."""
        if out.dtype != np.uint64 or not out.flags.c_contiguous:
            raise InvalidInputError("KeyStream.fill needs a C-contiguous uint64 array")
        nbytes = out.size * 8
        if nbytes == 0:
            return out
        zeros = _zeros(nbytes)
        # update_into wants an output buffer one block longer than its input: encrypt all but the
        # last two words straight into ``out`` (encrypting zeros gives the keystream itself), then
        # those two words through a small buffer.  The stream stays sequential.
        raw = out.view(np.uint8)
        head = max(0, nbytes - 16)
        if head:
            # numpy arrays are buffers; cryptography's stubs name only bytes-like types
            self._encryptor.update_into(zeros[:head], raw)  # type: ignore[arg-type]
        tail = np.empty(32, dtype=np.uint8)
        self._encryptor.update_into(zeros[: nbytes - head], tail)  # type: ignore[arg-type]
        raw[head:] = tail[: nbytes - head]
        return out

    def words(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit words of the stream (little-endian reading of the bytes)."""
        return self.fill(np.empty(int(n), dtype=np.uint64))
