package dev.ortserve.architecture;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAnyPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

/**
 * The layering of docs/architecture.md, checked on the compiled main classes (every dependency:
 * imports, fully qualified names, method calls, field types). Each arrow points one way:
 * api -> protocol -> service -> engine / embedding / store / hub, with the wire types (wire.model generated from the
 * contract, wire.union beside it) below api and protocol alike; the self-contained libraries (wire, hub, jinja,
 * parse, logging, config, modelgen, engine.rewrite, engine.memory, engine.speculative, engine.lora) import nothing of the app,
 * and no two packages depend on each other (the cycle rule covers every package, the engine's included). No class is
 * excepted by name; the one package-wide allowance (the Responses protocol builds the store's records, which are its
 * wire objects, and reaches the stores through service.responses) is its own rule below.
 */
class ArchitectureTest {

    private static final String API = "dev.ortserve.api..";
    private static final String PROTOCOL = "dev.ortserve.protocol..";
    private static final String RESPONSES = "dev.ortserve.protocol.openai.responses..";
    private static final String WIRE = "dev.ortserve.wire..";

    private static JavaClasses classes;

    @BeforeAll
    static void importClasses() {
        classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("dev.ortserve");
    }

    @Test
    void nothingBelowApiUsesTheApiLayer() {
        // services throw dev.ortserve.service.error exceptions; api.error alone chooses statuses and envelopes
        ArchRule rule = noClasses().that().resideOutsideOfPackage(API)
                .should().dependOnClassesThat().resideInAnyPackage("dev.ortserve.api.error..", "dev.ortserve.api.resource..",
                        "dev.ortserve.api.http..", "dev.ortserve.api.json..", "dev.ortserve.api.generated..", "dev.ortserve.api.ws..")
                .because("a service reports a failure as a domain exception and never chooses an HTTP status or calls a resource");
        rule.check(classes);
    }

    @Test
    void onlyTheApiAndTheProtocolsReadWireTypes() {
        ArchRule rule = noClasses().that().resideOutsideOfPackages(API, PROTOCOL, WIRE)
                .should().dependOnClassesThat().resideInAPackage(WIRE)
                .because("generated DTOs stay at the edge: below the protocols, requests and results are domain records");
        rule.check(classes);
    }

    private static final String[] BEYOND_A_PROTOCOL = {"dev.ortserve.api.resource..", "dev.ortserve.api.http..",
            "dev.ortserve.api.error..", "dev.ortserve.api.json..", "dev.ortserve.api.generated..", "dev.ortserve.api.ws..",
            "dev.ortserve.engine..", "dev.ortserve.embedding..", "dev.ortserve.store.."};

    @Test
    void protocolsSpeakWireTypesAndServicesOnly() {
        ArchRule rule = noClasses().that().resideInAPackage(PROTOCOL).and().resideOutsideOfPackage(RESPONSES)
                .should().dependOnClassesThat().resideInAnyPackage(BEYOND_A_PROTOCOL)
                .because("a protocol class turns its wire request into the service's turn and the turn's events into wire objects: "
                        + "HTTP, framing and error envelopes are the api's, models and stores the services'");
        rule.check(classes);
    }

    @Test
    void theResponsesProtocolBuildsTheStoresRecordsButNeverCallsAStore() {
        // the Responses API is stateful and its stored records are its wire objects (a response, its input items, the
        // ids that name its conversation): the protocol builds them (store.record), and reads and writes them through
        // service.responses.Conversations; the stores, their codec and their failures stay below the services
        ArchRule rule = noClasses().that().resideInAPackage(RESPONSES)
                .should().dependOnClassesThat(resideInAnyPackage(java.util.Arrays.stream(BEYOND_A_PROTOCOL)
                        .filter(p -> !p.equals("dev.ortserve.store..")).toArray(String[]::new))
                        .or(resideInAPackage("dev.ortserve.store..").and(not(resideInAPackage("dev.ortserve.store.record..")))))
                .because("the Responses protocol keeps to its wire types, the services and the store's records");
        rule.check(classes);
    }

    @Test
    void theChatProtocolsStartTheirTurnsThroughTheOneEntry() {
        // a chat turn's model is resolved, held, checked against the turn, rendered and admitted by ChatTurns.run: a chat
        // protocol maps its request onto a ChatTurnSpec and the started turn onto its answer (Responses and completions
        // still reach the host themselves: truncation renders before the turn, completions has no chat turn)
        noClasses().that().resideInAnyPackage("dev.ortserve.protocol.openai.chat..", "dev.ortserve.protocol.anthropic..")
                .should().dependOnClassesThat().haveFullyQualifiedName("dev.ortserve.service.GenerationModelHost")
                .because("a chat protocol is a mapper: the service owns the turn (ChatTurns.run)")
                .check(classes);
    }

    @Test
    void eachProtocolIsItsOwnHome() {
        // Anthropic's Messages API shares the services' chat turn with chat completions, never the OpenAI protocol classes
        noClasses().that().resideInAPackage("dev.ortserve.protocol.anthropic..")
                .should().dependOnClassesThat().resideInAPackage("dev.ortserve.protocol.openai..")
                .because("a protocol maps its own wire types onto the shared turn; what two protocols share lives in service/ (the Answer"
                        + " every protocol hands the api, in protocol/'s own root)")
                .check(classes);
        noClasses().that().resideInAPackage("dev.ortserve.protocol.openai..")
                .should().dependOnClassesThat().resideInAPackage("dev.ortserve.protocol.anthropic..")
                .check(classes);
    }

    @Test
    void nothingBelowTheProtocolsKnowsThem() {
        noClasses().that().resideOutsideOfPackages(API, PROTOCOL)
                .should().dependOnClassesThat().resideInAPackage(PROTOCOL)
                .because("services serve every protocol alike; a wire API's home is protocol/")
                .check(classes);
    }

    @Test
    void resourcesSpeakToServicesOnly() {
        ArchRule rule = noClasses().that().resideInAPackage(API)
                .should().dependOnClassesThat().resideInAnyPackage("dev.ortserve.engine..", "dev.ortserve.embedding..")
                .because("resources speak to services: models, tokenizers, sampling, grammars and token results are the services' business");
        rule.check(classes);
    }

    @Test
    void theApiNeverUsesTheStore() {
        // conversations are read and written below the protocols; a WebSocket connection's unstored turns are a
        // service.responses.ConnectionTurns it holds without seeing what is inside
        noClasses().that().resideInAPackage(API)
                .should().dependOnClassesThat().resideInAPackage("dev.ortserve.store..")
                .because("the api frames what the services answer: where a conversation is kept is the services' business")
                .check(classes);
    }

    @Test
    void theStoreKnowsNoServiceEngineOrApi() {
        noClasses().that().resideInAPackage("dev.ortserve.store..")
                .should().dependOnClassesThat().resideInAnyPackage(API, "dev.ortserve.service..", "dev.ortserve.engine..", "dev.ortserve.embedding..")
                .check(classes);
    }

    @Test
    void theEngineKnowsNoServiceStoreOrApi() {
        noClasses().that().resideInAnyPackage("dev.ortserve.engine..", "dev.ortserve.embedding..")
                .should().dependOnClassesThat().resideInAnyPackage(API, "dev.ortserve.service..", "dev.ortserve.store..")
                .check(classes);
    }

    @Test
    void noPackagesDependOnEachOther() {
        // every package is its own slice (dev.ortserve.engine and dev.ortserve.engine.kv are two): a cycle between two
        // packages means neither can be read, tested or moved without the other
        // one allowance: wire.union holds the hand-written types the generator maps the contract's oneOf schemas to
        // (schemaMappings in pom.xml); the generated wire.model uses them and they wrap generated models: one unit,
        // split only because generated code is never edited
        slices().matching("dev.ortserve.(**)").should().beFreeOfCycles()
                .ignoreDependency(resideInAPackage("dev.ortserve.wire.model.."), resideInAPackage("dev.ortserve.wire.union.."))
                .because("each arrow points one way: a package that needs one below it never gets used by it")
                .check(classes);
    }

    private static final String[] ENGINE_INTERNALS = {"dev.ortserve.engine.kv..", "dev.ortserve.engine.runner..",
            "dev.ortserve.engine.sampling.."};

    @Test
    void theAppUsesTheEngineThroughItsRootAndItsTwoDoors() {
        // the root holds the engine's shared types (requests, events, the spec, the pass and the runner seam); the app
        // loads a model through engine.load and runs it in engine.batching; blocks, pending KV, the prefix cache, the
        // onnxruntime runner and the sampler are engine business
        noClasses().that().resideOutsideOfPackage("dev.ortserve.engine..")
                .should().dependOnClassesThat().resideInAnyPackage(ENGINE_INTERNALS)
                .because("the app loads (engine.load) and runs (engine.batching) a model and holds the root's types; "
                        + "KV, runner and sampling internals stay behind them")
                .check(classes);
    }

    @Test
    void theEngineRootIsTheBottomOfTheEngine() {
        // the root's types are what every engine package shares: they may use the self-contained libraries, never the
        // packages that use them (the loop, the loader, KV, the runner, sampling, grammars)
        noClasses().that().resideInAPackage("dev.ortserve.engine")
                .should().dependOnClassesThat().resideInAnyPackage(concat("dev.ortserve.engine.load..", concat("dev.ortserve.engine.batching..",
                        concat("dev.ortserve.engine.grammar..", ENGINE_INTERNALS))))
                .because("the engine's shared types sit below the packages that use them")
                .check(classes);
    }

    @Test
    void theEngineInternalsKnowNeitherTheLoopNorTheLoader() {
        // kv, runner and sampling are used by the batching loop and by the loader (its load check runs a pass):
        // they know neither, and the loader does not know the loop
        noClasses().that().resideInAnyPackage(ENGINE_INTERNALS)
                .should().dependOnClassesThat().resideInAnyPackage("dev.ortserve.engine.batching..", "dev.ortserve.engine.load..")
                .because("the loop and the loader use KV, the runner and sampling, not the other way round")
                .check(classes);
        noClasses().that().resideInAPackage("dev.ortserve.engine.load..")
                .should().dependOnClassesThat().resideInAPackage("dev.ortserve.engine.batching..")
                .because("loading a model yields a LoadedModel; running it is the batching loop's, which the app starts")
                .check(classes);
    }

    private static String[] concat(String first, String[] rest) {
        String[] all = new String[rest.length + 1];
        all[0] = first;
        System.arraycopy(rest, 0, all, 1, rest.length);
        return all;
    }

    @Test
    void theWireTypesImportNothingOfOrtserve() {
        // the contract's types (generated into wire.model, the unions the generator cannot express in wire.union) sit
        // below the api that frames them and the protocols that map them: both import them, they import neither, so no
        // arrow runs from a protocol back up into the api's packages
        selfContained("dev.ortserve.wire");
    }

    @Test
    void protocolsNeverReachIntoTheApi() {
        noClasses().that().resideInAPackage(PROTOCOL)
                .should().dependOnClassesThat().resideInAPackage(API)
                .because("the api calls the protocols: their wire types live in dev.ortserve.wire, below both")
                .check(classes);
    }

    @Test
    void theHubClientImportsNothingOfOrtserve() {
        // the Hugging Face Hub client resolves and downloads files: the service hands it ids, directories and what to keep
        selfContained("dev.ortserve.hub");
    }

    @Test
    void theGraphRewriterImportsNothingOfOrtserve() {
        // the rewriter reads and writes ONNX files (protobuf only): the loader asks it for a rewritten graph and probes
        // the result itself, so it knows neither the engine nor the app
        selfContained("dev.ortserve.engine.rewrite");
    }

    @Test
    void theConfigurationImportsNothingOfOrtserve() {
        // every layer reads its settings from OrtserveConfig: the mapping knows none of them (engine and store options are
        // built from it by the services, not by the config)
        selfContained("dev.ortserve.config");
    }

    @Test
    void theModelGeneratorImportsNothingOfOrtserve() {
        // the demo and test models are written by a generator that knows only ONNX and tokenizer files, so a model it
        // writes is loaded by the same path as any exporter's
        selfContained("dev.ortserve.modelgen");
    }

    @Test
    void theImageLibraryImportsNothingOfOrtserve() {
        // decoding, Pillow's resampling and the fetch policy work on bytes and URLs; the service maps requests onto them
        selfContained("dev.ortserve.image");
    }

    @Test
    void theJinjaInterpreterImportsNothingOfOrtserve() {
        selfContained("dev.ortserve.jinja");
    }

    @Test
    void theOutputParsersImportNothingOfOrtserve() {
        selfContained("dev.ortserve.parse");
    }

    @Test
    void theLoggingHelpersImportNothingOfOrtserve() {
        // the access record is filled by services and written by the api: it must know neither
        selfContained("dev.ortserve.logging");
    }

    @Test
    void theMemoryAccountingImportsNothingOfOrtserve() {
        // the budget's split and the native buffers' lifetimes are read by the engine (kv, runner) and the service alike:
        // knowing neither keeps both arrows pointing down and no cycle between kv and runner through it
        selfContained("dev.ortserve.engine.memory");
    }

    @Test
    void theLoraFormatsImportNothingOfOrtserve() {
        // PEFT's safetensors and onnxruntime's adapter file are formats: the loader converts and checks adapters with
        // them against a graph's LoRA inputs it reads itself, so they know neither the loader nor the engine
        selfContained("dev.ortserve.engine.lora");
    }

    @Test
    void theDraftingImportsNothingOfOrtserve() {
        // drafting reads token ids and counts what was accepted: the engine's loop verifies, the drafter only proposes,
        // so the engine (and the config that sets it up) use it and it knows neither
        selfContained("dev.ortserve.engine.speculative");
    }

    /** A library lifted out of the app: its classes depend on nothing of dev.ortserve outside their own package tree. */
    private static void selfContained(String library) {
        noClasses().that().resideInAPackage(library + "..")
                .should().dependOnClassesThat(resideInAPackage("dev.ortserve..").and(not(resideInAPackage(library + ".."))))
                .because(library + " is a self-contained library: the app uses it, never the other way round")
                .check(classes);
    }
}
