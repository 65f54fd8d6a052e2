"""Frame wrappers of the DeepMind Atari preprocessing: `WarpFrame` (luminance, area resize)
and `FrameStack` (the last k frames on the channel axis). `rlflow.envs.atari.wrap_deepmind`
applies them after the episode wrappers; see that module for the whole protocol.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.checks import check_int
from rlflow.errors import ConfigError

__all__ = ["FrameStack", "WarpFrame"]

ResetResult = tuple[Any, dict[str, Any]]
StepResult = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
"""ITU-R BT.601 luma weights (as OpenCV's RGB2GRAY)."""


def _area_taps(src: int, dst: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
    """Resample ``src`` pixels to ``dst`` by area: (indices, weights), both ``(taps, dst)``.

    Output pixel ``i`` averages the source interval ``[i * s, (i + 1) * s)``, ``s = src / dst``,
    each source pixel weighted by its overlap with the interval divided by ``s``.
    """
    scale = src / dst
    lo = np.arange(dst, dtype=np.float64) * scale
    first = np.floor(lo).astype(np.intp)
    index = np.arange(int(np.ceil(scale)) + 1)[:, np.newaxis] + first[np.newaxis, :]
    overlap = np.minimum(index + 1, lo + scale) - np.maximum(index, lo)
    weights = np.where(index < src, np.clip(overlap, 0.0, None), 0.0) / scale
    return np.minimum(index, src - 1), weights.astype(np.float32)


def _resample_rows(
    image: npt.NDArray[np.float32], taps: tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]
) -> npt.NDArray[np.float32]:
    """Resample the rows (axis 0) of a 2-D image with `_area_taps` output."""
    index, weights = taps
    out: npt.NDArray[np.float32] = image[index[0]] * weights[0][:, np.newaxis]
    for k in range(1, index.shape[0]):
        out += image[index[k]] * weights[k][:, np.newaxis]
    return out


class WarpFrame(gym.ObservationWrapper[Any, Any, Any]):
    """Convert frames to luminance and resize them by area averaging: ``(height, width, 1)``.

    Input frames are ``(H, W, 3)`` RGB or ``(H, W)`` / ``(H, W, 1)`` grayscale, uint8. The
    resize is OpenCV's INTER_AREA for downscaling, written in numpy (OpenCV is not needed).
    """

    def __init__(self, env: gym.Env[Any, Any], width: int = 84, height: int = 84) -> None:
        """Wrap ``env``, whose observation space is a uint8 image Box."""
        for name, value in (("width", width), ("height", height)):
            check_int(value, f"WarpFrame: {name}", low=1)
        space = env.observation_space
        shape = getattr(space, "shape", None)
        ok_shape = shape is not None and (
            len(shape) == 2 or (len(shape) == 3 and shape[2] in (1, 3))
        )
        if not isinstance(space, spaces.Box) or space.dtype != np.uint8 or not ok_shape:
            raise ConfigError(
                f"WarpFrame: observation space {space} must be a uint8 Box of shape (H, W, 3), "
                "(H, W, 1) or (H, W)"
            )
        super().__init__(env)
        self._rgb = len(space.shape) == 3 and space.shape[2] == 3
        self._row_taps = _area_taps(space.shape[0], height)
        self._col_taps = _area_taps(space.shape[1], width)
        self.observation_space = spaces.Box(0, 255, (height, width, 1), np.uint8)

    def observation(self, observation: Any) -> npt.NDArray[np.uint8]:
        """One frame in, one ``(height, width, 1)`` uint8 frame out."""
        frame = np.asarray(observation)
        # Weighted sums of gathered rows, no matrix products: BLAS threads spin and stall on a
        # busy machine (84x210 @ 210x160 took 40 ms instead of 0.2 ms here under load).
        if self._rgb:
            gray = frame[..., 0] * _LUMA[0] + frame[..., 1] * _LUMA[1] + frame[..., 2] * _LUMA[2]
        else:
            gray = frame.reshape(frame.shape[:2]).astype(np.float32)
        resized = _resample_rows(_resample_rows(gray, self._row_taps).T, self._col_taps).T
        return np.clip(np.rint(resized), 0, 255).astype(np.uint8)[:, :, np.newaxis]


class FrameStack(gym.Wrapper[Any, Any, Any, Any]):
    """Stack the last ``k`` frames along the last (channel) axis, the newest last.

    Frames ``(H, W, C)`` become ``(H, W, C * k)`` of the same dtype; after a reset every slot
    holds the first frame. Each observation returned is a fresh array.
    """

    def __init__(self, env: gym.Env[Any, Any], k: int = 4) -> None:
        """Wrap ``env``, whose observation space is a Box of shape ``(H, W, C)``."""
        check_int(k, "FrameStack: k", low=1)
        space = env.observation_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 3:
            raise ConfigError(
                f"FrameStack: observation space {space} must be a Box of shape (H, W, C); "
                "apply WarpFrame first"
            )
        super().__init__(env)
        self.k = k
        """Frames stacked."""
        self._channels = space.shape[2]
        self.observation_space = spaces.Box(
            np.repeat(space.low, k, axis=2), np.repeat(space.high, k, axis=2), dtype=space.dtype
        )
        self._frames = np.zeros(self.observation_space.shape, dtype=space.dtype)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        """Reset and fill every slot with the first frame."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._frames[...] = np.tile(obs, (1, 1, self.k))
        return self._frames.copy(), info

    def step(self, action: Any) -> StepResult:
        """Step and shift the new frame in at the end of the channel axis."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        c = self._channels
        self._frames[..., :-c] = self._frames[..., c:]
        self._frames[..., -c:] = obs
        return self._frames.copy(), reward, terminated, truncated, info
