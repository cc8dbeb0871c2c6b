"""Files: their names (`names`), writing them whole or not at all (`atomic`, with `hdf5` and
`json_io` on top and `signals` behind it), the check before a command writes one (`guard`)
and the lock that keeps a second writer out of a directory (`lock`)."""

from __future__ import annotations

import os
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]
