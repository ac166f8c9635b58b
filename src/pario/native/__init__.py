"""pario's C code: the RMT core (journal + in-memory index), shared by the Python store
(:mod:`pario.store.rmt`, through the extension ``pario.native._rmt``) and the C runtime of
MPI programs.  Built in place by ``scripts/build_native.py`` (run by ``scripts/setup.sh``)."""
