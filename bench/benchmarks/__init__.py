"""asv benchmark suite for numtk (see ``bench/README.md``)."""
