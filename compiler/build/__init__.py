"""From IR to an artifact: the one pipeline for JIT and AOT (:mod:`.pipeline`), the vendor
toolchains (:mod:`.toolchains`), the compiled-kernel cache (:mod:`.cache`), kernel bundles
(:mod:`.bundle`, :mod:`.bundle_build`, :mod:`.bundle_registry`) and the compiler's counters.

May import: the ground floor and the compiler's other rooms.
"""
