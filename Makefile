# The two commands of the README: `make up` runs the service, `make test` passes every test.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NODE := node
TSX := node --import tsx

.PHONY: help deps build compile-services compile-dashboard proto proto-check clients-generate clients-check typecheck up start down test test-unit test-integration bench clean build-client build-services build-dashboard

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

deps: ## Install npm packages and Debian chromium, nats-server, ffmpeg when missing
	@scripts/install.sh

build: build-services build-dashboard ## Compile TypeScript to dist/ (the client package first: the gateway's /mcp imports it), bundle each service's entry (its modules load on a third of the CPU), and the dashboard (it bundles the client)

build-client: deps
	@npm run build -w clients/typescript --silent

build-services: build-client
	@$(MAKE) --no-print-directory compile-services

build-dashboard: build-client
	@$(MAKE) --no-print-directory compile-dashboard

# The two halves of the build without their prerequisites (the client package built): make test runs them beside unit files.
compile-services:
	@npx tsc -p tsconfig.json
	@$(TSX) scripts/bundle.ts

compile-dashboard:
	@npm run build --silent -w dashboard

typecheck: deps
	@npm run build -w clients/typescript --silent
	@npx tsc -p tsconfig.json --noEmit

proto: deps ## Regenerate gen/ from proto/
	@npx buf lint
	@npx buf generate

proto-check: deps ## Fail when gen/ is stale against proto/
	@npx buf lint
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && npx buf generate -o "$$tmp" && \
	  if diff -r gen "$$tmp/gen" >/dev/null; then echo "proto-check: gen/ is up to date"; \
	  else diff -r gen "$$tmp/gen" | head -20; echo "proto-check: gen/ is stale; run make proto and commit" >&2; exit 1; fi

clients-generate: deps ## Regenerate the TypeScript client's types from the API's OpenAPI document
	@$(TSX) clients/typescript/scripts/generate.ts

clients-check: deps ## Fail when the TypeScript client's generated types are stale against the API
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(TSX) clients/typescript/scripts/generate.ts "$$tmp" && \
	  if diff -q clients/typescript/src/generated/openapi.ts "$$tmp/openapi.ts" >/dev/null; then echo "clients-check: clients/typescript/src/generated/ is up to date"; \
	  else diff -u clients/typescript/src/generated/openapi.ts "$$tmp/openapi.ts" | head -30; echo "clients-check: clients/typescript/src/generated/ is stale against the API; run make clients-generate and commit" >&2; exit 1; fi

up: build ## Run every service locally; prints the API URL and a key (Ctrl-C stops)
	@$(NODE) dist/scripts/up.js

start: build ## Like up, in the background (logs in data/up.log); stop with make down
	@$(NODE) dist/scripts/up.js --detach

down: ## Stop a background make start
	@$(NODE) dist/scripts/up.js down 2>/dev/null || $(TSX) scripts/up.ts down

# The checks and the build side by side (tsc is most of it and uses one core), and beside them the first unit files, which run
# from the sources: scripts/test.ts runs ATS_TEST_BUILD first in one of its lanes, and the integration files once it passed.
test: build-client ## Unit tests, integration tests, proto and client type checks, and the build
	@ATS_STACK_MODE=dist ATS_TEST_BUILD='$(MAKE) --no-print-directory -j3 proto-check clients-check compile-services compile-dashboard' $(TSX) scripts/test.ts

test-unit: deps
	@$(TSX) scripts/test.ts unit

test-integration: deps build
	@ATS_STACK_MODE=dist $(TSX) scripts/test.ts integration

bench: build ## Benchmarks (figures are ratios against a baseline in the same run)
	@$(TSX) bench/run.ts

clean:
	rm -rf dist clients/typescript/dist
