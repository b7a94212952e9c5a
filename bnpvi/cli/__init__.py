"""The console entry points. Importing this package, as each of them does before any OpenMP runtime loads
(``import bnpvi`` loads none), makes idle OpenMP threads sleep instead of spin unless the environment says
otherwise: on shared cores a spinning thread takes the core that the thread it waits for needs (docs/parallel.md)."""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
