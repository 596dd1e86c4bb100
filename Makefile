# One entry point for people and CI. `make test` and `make demo` build .venv from scratch.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Every in-tree distribution that has tests; plugins join this list as they land.
PACKAGES := . ./plugin-template ./plugins/tantivy ./plugins/sentence-transformers ./plugins/bedrock ./plugins/pinecone ./plugins/weaviate
TEST_DIRS := tests plugin-template/tests plugins/tantivy/tests plugins/sentence-transformers/tests plugins/bedrock/tests plugins/pinecone/tests plugins/weaviate/tests

.PHONY: install install-core test lint demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The core alone: what `make demo` needs (SQLite, the hashing embedder; no torch).
install-core: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

# Everything: core, every in-tree plugin and the test tools.
install: $(BIN)/python
	# torch first, pinned: 2.13.0 is the CPU build (any other version pulls a CUDA build).
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test,bench,ann,code,documents,mcp,langchain,llamaindex]' $(foreach p,$(filter-out .,$(PACKAGES)),-e '$(p)')
	# minilm's ONNX Runtime path (and minilm-int8) and its OpenVINO bf16 path; without them
	# minilm runs on sentence-transformers
	$(BIN)/python -m pip install --quiet -e './plugins/sentence-transformers[onnx,openvino]'

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest $(TEST_DIRS)

# The main job on the embedded defaults (SQLite, hashing embedder): index this checkout,
# then search it. State goes to $KAIROX_HOME (default ~/.local/share/kairox).
QUERY ?= how does a plugin register a knowledge base kind
demo: install-core
	$(BIN)/kairox index .
	$(BIN)/kairox search "$(QUERY)" -k 5

clean:
	rm -rf $(VENV)
