package dev.ortserve.config;

import io.quarkus.runtime.configuration.MemorySize;
import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;
import io.smallrye.config.WithName;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * The one typed configuration mapping of ortserve. Every key is documented in
 * docs/configuration.md; the environment-variable form is the upper-cased key with
 * dots and dashes replaced by underscores (ortserve.model-path = ORTSERVE_MODEL_PATH).
 */
@ConfigMapping(prefix = "ortserve")
public interface OrtserveConfig {

    /**
     * The decoder model to serve: a local directory, or a Hugging Face Hub id (owner/name,
     * owner/name@revision, owner/name@revision:subfolder) fetched into the Hub cache; unset = the generated demo model.
     */
    Optional<Path> modelPath();

    /** Revision (branch, tag or commit) of a Hub model-path that names none; default main. */
    Optional<String> modelRevision();

    /** The ONNX variant to serve (model.onnx, onnx/model_fp16.onnx, model_q4.onnx ...); unset = the full-precision one. */
    Optional<String> modelFile();

    /** Model id reported by /v1/models and required in requests; default: the model directory's name. */
    Optional<String> modelName();

    /**
     * LoRA adapters of the model ORTSERVE_MODEL_PATH names (or of the demo model), as vLLM's --lora-modules:
     * {@code name=path} pairs, comma-separated; each path a PEFT adapter directory or an .onnx_adapter file. A request
     * names an adapter in its {@code model} field. With ORTSERVE_MODELS_FILE, list them under each model's
     * {@code adapters} instead.
     */
    Optional<java.util.List<String>> loraModules();

    /**
     * vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING: POST /v1/load_lora_adapter and /v1/unload_lora_adapter (behind
     * ORTSERVE_ADMIN_KEY) load and unload adapters while serving. Every model then gets LoRA inputs on all seven
     * projections at load (the inactive side paths cost decode time: docs/benchmarks.md). Off: those endpoints are 404.
     */
    @WithDefault("false")
    boolean allowRuntimeLoraUpdating();

    /** A Jinja chat template file overriding the model's own (tokenizer_config.json / chat_template.jinja). */
    Optional<Path> chatTemplate();

    /** Accept a request's own chat template (vLLM's chat_template field on chat completions and /tokenize); off: 400. */
    @WithDefault("false")
    boolean allowRequestChatTemplate();

    /** Longest a chat template render (the model's or a request's) may take; beyond it the request gets 400 chat_template_error. */
    @WithDefault("2s")
    Duration chatTemplateTimeout();

    /** Longest text (or list) a chat template render may build, in characters; beyond it the request gets 400 chat_template_error. */
    @WithDefault("4000000")
    long chatTemplateMaxChars();

    /** Tool-call parser of the served model: hermes, llama3_json, mistral, qwen3_xml, pythonic, openai, or none; unset = picked from the chat template and tokenizer. */
    Optional<String> toolCallParser();

    /** Reasoning parser of the served model: qwen3, deepseek_r1, mistral, openai_gptoss, or none; unset = picked from the chat template and tokenizer. */
    Optional<String> reasoningParser();

    /**
     * The access log (logger category dev.ortserve.access): one INFO line per request (method, path, status, duration,
     * request id, model, tokens, error code) as text or as one JSON object, or off.
     */
    @WithDefault("text")
    AccessLogFormat accessLog();

    enum AccessLogFormat { TEXT, JSON, OFF }

    /** Where generated models (the demo model) are cached. */
    @WithDefault("${user.home}/.cache/ortserve/models")
    Path modelCacheDir();

    /** A sentence-transformers ONNX export: a directory or a Hub id (as model-path); unset = the bundled all-MiniLM-L6-v2 (fp32). */
    Optional<Path> embeddingModelPath();

    /** The ONNX variant of the embedding model; unset = the full-precision one. */
    Optional<String> embeddingModelFile();

    /** Model id of the embedding model; default: the directory's name, or all-minilm-l6-v2 for the bundled one. */
    Optional<String> embeddingModelName();

    /** Inputs per embedding forward pass. */
    @WithDefault("32")
    int embeddingMaxBatch();

    /** Embedding requests waiting for the embedding worker; beyond this, 429. */
    @WithDefault("256")
    int embeddingQueueCapacity();

    /** cpu (default) or cuda; cuda needs the onnxruntime_gpu build (Maven profile -Pcuda). */
    @WithDefault("cpu")
    ExecutionProvider executionProvider();

    /** CUDA device id when execution-provider is cuda. */
    @WithDefault("0")
    int cudaDeviceId();

    /** ONNX Runtime intra-op threads; unset = the processors available to the JVM. */
    OptionalInt intraOpThreads();

    /**
     * ONNX Runtime's intra-op threads spin between operators instead of sleeping: faster batch-1
     * decode, but the spinning threads take cores the HTTP threads need (docs/benchmarks.md).
     */
    @WithDefault("false")
    boolean intraOpSpinning();

    /**
     * With intra-op-spinning: how long, in microseconds, an idle intra-op thread spins before it
     * sleeps (onnxruntime's session.intra_op.spin_duration_us); -1 = onnxruntime's own spin loop,
     * which also spins between decode steps, on the cores the HTTP threads need.
     */
    @WithDefault("200")
    int intraOpSpinMicros();

    /** Comma-separated API keys; none configured = open server. */
    Optional<List<String>> apiKeys();

    /** Largest accepted request body; larger bodies get 413 before they are read. */
    @WithDefault("8M")
    MemorySize maxBodySize();

    /** Conversation store for the Responses API. */
    @WithDefault("memory")
    StoreKind store();

    /** How long a stored response lives (refreshed on every write that touches it). */
    @WithDefault("24h")
    Duration storeTtl();

    /** Largest serialized stored response; a larger one is not stored (400 when store=true was asked). */
    @WithDefault("1048576")
    int storeMaxRecordBytes();

    /** Largest stored history of one conversation (every response chained from one root); continuing past it is a 400. */
    @WithDefault("4194304")
    int storeMaxConversationBytes();

    /** The in-memory store keeps at most this many responses; the ones closest to expiry go first. */
    @WithDefault("10000")
    int storeMaxEntries();

    /** How long a store operation may take before the request fails with 503 (the store is treated as down). */
    @WithDefault("1500ms")
    Duration storeTimeout();

    /** A stream whose client reads nothing for this long is cut off and its generation stopped (slow readers cannot hold a slot forever). */
    @WithDefault("30s")
    Duration streamStallTimeout();

    /** Image input, for vision-language models (a text model refuses images whatever these say). */
    Images images();

    interface Images {
        /** Images one request may hold (its conversation's included). */
        @WithDefault("8")
        int maxPerRequest();

        /** Bytes one image may have, inline or fetched. */
        @WithDefault("20M")
        MemorySize maxBytes();

        /** Pixels one image may have (width x height, read from its header before it is decoded: a decompression bomb is refused unread). */
        @WithDefault("25000000")
        long maxPixels();

        /** http(s) image URLs: off unless enabled. */
        Fetch fetch();

        interface Fetch {
            /** Fetch http(s) image URLs (data: URLs are always read). */
            @WithDefault("false")
            boolean enabled();

            /**
             * The hosts fetched from ({@code example.com}, {@code *.example.com}); unset: any public host. Addresses inside the
             * network (loopback, private, link-local) are fetched only from hosts named here exactly.
             */
            java.util.Optional<java.util.List<String>> allowedHosts();

            /** The most one fetch may take, redirects included. */
            @WithDefault("10s")
            Duration timeout();
        }
    }

    /** The Responses API's WebSocket mode ({@code ws://HOST/v1/responses}). */
    Websocket websocket();

    interface Websocket {
        /** Largest client message; a larger one is discarded with an error event (the connection stays usable). */
        @WithDefault("8M")
        MemorySize maxMessageSize();

        /** A connection with no response running that receives nothing for this long is closed (0: never). */
        @WithDefault("5m")
        Duration idleTimeout();

        /** Responses one connection may create; the next response.create gets an error event and the connection is closed. */
        @WithDefault("1000")
        int maxResponses();

        /** Responses a connection keeps to continue without the store (its store:false ones), most recently used first. */
        @WithDefault("16")
        int maxCachedResponses();
    }

    /** On SIGTERM: how long in-flight requests (streams included) may run on while new ones get 503 (quarkus.shutdown.timeout). */
    @WithDefault("30s")
    Duration drainTimeout();

    /**
     * Background responses: how long the lease of the replica running one lasts without renewal
     * (renewed every third of it); once it lapses (the replica died) any replica marks the response failed.
     */
    @WithDefault("10s")
    Duration backgroundLease();

    /**
     * The secret every replica shares for compaction items (POST /v1/responses/compact): they are
     * encrypted and authenticated with a key derived from it. Unset: a random key per process
     * (compaction items then work only on the replica, and in the process, that made them).
     */
    Optional<String> compactionKey();

    /** Compaction keeps this many of the last user turns (each with everything after it) verbatim; older turns are summarized. */
    @WithDefault("2")
    int compactionKeepTurns();

    /** Longest summary of the older turns the served model may write when compacting. */
    @WithDefault("256")
    int compactionSummaryMaxTokens();

    /**
     * The memory the whole process may use: the model's resident weights, the JVM's heap, onnxruntime's
     * working memory and the KV are split from it at start (logged). Unset = the cgroup's memory limit in a
     * container, else the host's available memory.
     */
    Optional<MemorySize> memoryLimit();

    /**
     * A models file (YAML or JSON) listing the generative models this server serves, each with its id, aliases,
     * path, precision, context and whether it is pinned (docs/models.md); unset = ORTSERVE_MODEL_PATH as the one
     * model, or, with neither, the demo model (pinned) and the agent model beside it (loaded on first request).
     */
    Optional<Path> modelsFile();

    /**
     * How long an unpinned model stays loaded after its last request (Ollama's keep_alive: a duration such as
     * 5m or 300s, -1 = forever, 0 = unload as soon as it is idle); a models-file entry may set its own.
     */
    @WithDefault("5m")
    String keepAlive();

    /** The most generative models loaded at once (llama.cpp's --models-max); the least recently used idle one unloads first. */
    @WithDefault("4")
    int modelsMaxLoaded();

    /** How long a request for a model that is loading waits for it; after that: 503 model_not_ready with Retry-After. */
    @WithDefault("60s")
    Duration modelLoadWait();

    /** The key that POST /models/load and /models/unload require (Bearer); unset = those endpoints answer 404. */
    Optional<String> adminKey();

    /** Engine limits. */
    Engine engine();

    /** Speculative decoding (settings named as vLLM's). */
    Speculative speculative();

    interface Speculative {
        /**
         * The most draft tokens one verification pass checks (the draft length adapts below it to what the sequence
         * accepts); 0 turns speculative decoding off, predicted outputs included.
         */
        @WithDefault("8")
        int numSpeculativeTokens();

        /** Prompt lookup (n-gram) drafting for requests without a predicted output. */
        @WithDefault("true")
        boolean promptLookup();

        /** The shortest tail of the sequence looked up. */
        @WithDefault("2")
        int promptLookupMin();

        /** The longest tail of the sequence looked up. */
        @WithDefault("4")
        int promptLookupMax();

        /**
         * Speculate only while the batch has at most this many running sequences: each is verified in a pass of its
         * own (onnxruntime's CPU GroupQueryAttention), which costs more than a batched decode step once more run.
         */
        @WithDefault("1")
        int maxBatch();

        /**
         * A draft model for requests without a predicted output (instead of prompt lookup): a directory or Hub id of a
         * model with the served model's tokenizer, or {@code self} (the served model's own files, at
         * {@code draft-weight-precision}). Its tokenizer is checked at start.
         */
        Optional<String> draftModelPath();

        /** The precision the draft model is served at ({@code model}, {@code int8}, {@code int4}): int4 by default. */
        @WithDefault("int4")
        String draftWeightPrecision();
    }

    interface Engine {
        /** Sequences decoded together in one batch. */
        @WithDefault("16")
        int maxSequences();

        /** Requests waiting for a batch slot; beyond this, 429. */
        @WithDefault("64")
        int queueCapacity();

        /** Prompt tokens prefilled per engine step, so long prompts do not freeze running streams. */
        @WithDefault("256")
        int prefillChunkTokens();

        /**
         * How long an idle engine lets a burst of requests gather before its first prefill: it starts
         * once no new request has come for a quarter of this, the queue holds max-sequences, or this
         * much has passed since the first arrival. 0 starts at once.
         */
        @WithDefault("50ms")
        Duration batchWindow();

        /**
         * The most KV the automatic prefix cache may keep (blocks of 16 tokens, least recently used
         * evicted first), a cap inside the KV budget ({@code kv-cache-bytes}, whose room running
         * sequences take first); 0 turns it off; unset = KV for 32,768 tokens of the model, at most 1 GiB.
         */
        Optional<MemorySize> prefixCacheBytes();

        /**
         * Precision of the decoder's constant MatMul weights: model (as exported), int8 or int4
         * (block-quantized on load to onnxruntime's MatMulNBits, blocks of 32; already quantized
         * models are served as they are).
         */
        @WithDefault("model")
        String weightPrecision();

        /**
         * Element type of the KV cache: auto (float16 where attention runs as GroupQueryAttention, as exported or fused on
         * load; the model's own elsewhere), model (the model's own) or float16 (required: graphs without
         * GroupQueryAttention stop the start). float16 runs the op in float16 with float16 past/present, a graph rewrite
         * on load checked against the original within a logit cosine bound; half the KV bytes per token.
         */
        @WithDefault("auto")
        String kvCacheDtype();

        /** RMSNorm subgraphs are fused into onnxruntime's SimplifiedLayerNormalization on load (a graph rewrite, checked like the others). */
        @WithDefault("true")
        boolean fuseNorms();

        /**
         * Rotary-position subgraphs (rotate_half: halves, negate, concatenate, multiply by cos/sin of
         * the positions) are fused into onnxruntime's RotaryEmbedding on load (a graph rewrite, checked like the others).
         */
        @WithDefault("true")
        boolean fuseRotary();

        /**
         * Explicit attention (Optimum and transformers' exports) is rewritten on load into onnxruntime's
         * GroupQueryAttention, so the graph is served right-padded with its KV written in place (see
         * kv-in-place); checked on the load probe like the other rewrites.
         */
        @WithDefault("true")
        boolean fuseAttention();

        /**
         * GroupQueryAttention (fused or exported) runs as the op of ortserve's native library (src/main/native): decode
         * steps read each KV head once for the query heads that share it; prompts run onnxruntime's own kernel. CPU
         * provider on Linux x86-64 only (where the build compiles the library); elsewhere onnxruntime's op as before.
         */
        @WithDefault("true")
        boolean nativeAttention();

        /**
         * Quantized weights' MatMuls (MatMulNBits with int8 activations: int4 / int8 serving, and exports quantized so)
         * run as the op of ortserve's native library (src/main/native): the same int8 quantization of the activations as
         * onnxruntime's kernel, integer dot products, each weight block read once for up to four rows. {@code auto}: where
         * onnxruntime's own kernel is its AVX2 one (a CPU with AVX2 and no AVX-512 or AVX-VNNI), {@code true}: always,
         * {@code false}: never. CPU provider on Linux x86-64 only; elsewhere onnxruntime's op as before.
         */
        @WithDefault("auto")
        String nativeMatmul();

        /**
         * Constant-weight MatMuls that read the same activations (a layer's q, k and v; its gate and
         * up) are packed into one MatMul and a Split on load (a graph rewrite, checked like the others).
         */
        @WithDefault("true")
        boolean packProjections();

        /** The head runs on each prompt's last position only (a graph rewrite on load); false serves the graph as exported. */
        @WithDefault("true")
        boolean lastPositionLogits();

        /**
         * Decode steps of GroupQueryAttention graphs (onnxruntime-genai builder exports, right-padded) bind one
         * KV buffer per layer as both the op's past and present input/output, so each step writes its new
         * position in place instead of copying the whole past into a new present; other graphs copy as before.
         * On by default: same tokens as the copying path, 1.8-2.0x the decode rate at 1,600 tokens on a
         * Qwen3-0.6B shape (docs/benchmarks.md); {@code false} restores the copying path.
         */
        @WithDefault("true")
        boolean kvInPlace();

        /**
         * KV budget: a waiting request starts only while the running sequences' KV, counted as the batch lays
         * it out (one row each, every row as long as the largest prompt + max_tokens among them), fits (it
         * waits otherwise, at most queue-timeout); unset = what the memory budget ({@code ortserve.memory-limit})
         * leaves once the model is loaded, at most max-sequences rows of the whole context (the split is logged at start). The prefix cache's blocks that no running
         * sequence references count against it too, and are evicted before a request has to wait.
         */
        Optional<MemorySize> kvCacheBytes();

        /**
         * The longest a request waits in the queue for KV budget (or a batch slot) before it is answered 503
         * with Retry-After; 0 = it waits as long as it takes.
         */
        @WithDefault("60s")
        java.time.Duration queueTimeout();

        /** Context length override; unset = the model's own. */
        OptionalInt maxModelLen();

        /** Largest `n` accepted per request. */
        @WithDefault("16")
        @WithName("max-n")
        int maxN();
    }

    enum ExecutionProvider { cpu, cuda }

    enum StoreKind { memory, redis }
}
