# Included by scripts/install.sh at the end of llama.cpp's project() call
# (CMAKE_PROJECT_llama.cpp_INCLUDE), inside llama-cpp-python's build.
#
# llama-cpp-python forces llama.cpp's "common" library ON (a cache variable set with FORCE), but
# its Python package never loads it: llama_cpp loads libllama and libggml, and mtmd only for image
# chats, which install.sh does not build. common and its HTTP client are 57 of the 140 build steps
# and half the build time (docs/benchmark-history.md, section 26). A normal variable in llama.cpp's
# directory scope hides the cache entry from its option() and if() (policy CMP0077).
set(LLAMA_BUILD_COMMON OFF)
