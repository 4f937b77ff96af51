package dev.ortserve.architecture;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

/**
 * The layering of docs/architecture.md, checked on the compiled main classes (every dependency:
 * imports, fully qualified names, method calls, field types). Each arrow points one way:
 * api -> protocol -> service -> engine / embedding / store / hub; the self-contained libraries (hub, jinja,
 * parse, engine.rewrite) import nothing of the app. No class is excepted by name; the one package-wide allowance
 * (the Responses protocol reads and writes its conversations in the store) is its own rule below.
 */
class ArchitectureTest {

    private static final String API = "dev.ortserve.api..";
    private static final String PROTOCOL = "dev.ortserve.protocol..";
    private static final String RESPONSES = "dev.ortserve.protocol.openai.responses..";

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
                        "dev.ortserve.api.http..", "dev.ortserve.api.json..", "dev.ortserve.api.generated..")
                .because("a service reports a failure as a domain exception and never chooses an HTTP status or calls a resource");
        rule.check(classes);
    }

    @Test
    void onlyTheApiAndTheProtocolsReadWireTypes() {
        ArchRule rule = noClasses().that().resideOutsideOfPackages(API, PROTOCOL)
                .should().dependOnClassesThat().resideInAnyPackage("dev.ortserve.api.model..", "dev.ortserve.api.union..")
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
    void theResponsesProtocolKeepsItsConversationsInTheStoreOnly() {
        // the Responses API is stateful: its stored records are its wire objects (response, input items), so the
        // protocol reads and writes the conversation store itself; everything else of a protocol's rule holds
        ArchRule rule = noClasses().that().resideInAPackage(RESPONSES)
                .should().dependOnClassesThat().resideInAnyPackage(java.util.Arrays.stream(BEYOND_A_PROTOCOL)
                        .filter(p -> !p.equals("dev.ortserve.store..")).toArray(String[]::new))
                .because("the Responses protocol keeps to its wire types, the services and its conversations in the store");
        rule.check(classes);
    }

    @Test
    void eachProtocolIsItsOwnHome() {
        // Anthropic's Messages API shares the services' chat turn with chat completions, never the OpenAI protocol classes
        noClasses().that().resideInAPackage("dev.ortserve.protocol.anthropic..")
                .should().dependOnClassesThat().resideInAPackage("dev.ortserve.protocol.openai..")
                .because("a protocol maps its own wire types onto the shared turn; what two protocols share lives in service/")
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
    void theGraphRewriterImportsNothingOfTheEngine() {
        noClasses().that().resideInAPackage("dev.ortserve.engine.rewrite..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.ortserve.engine", "dev.ortserve.engine.grammar..",
                        "dev.ortserve.engine.load..", "dev.ortserve.engine.kv..", "dev.ortserve.engine.runner..", "dev.ortserve.engine.sampling..")
                .check(classes);
    }

    @Test
    void theEngineRootIsItsOnlyFace() {
        String[] internals = {"dev.ortserve.engine.load..", "dev.ortserve.engine.kv..", "dev.ortserve.engine.runner..",
                "dev.ortserve.engine.sampling.."};
        noClasses().that().resideOutsideOfPackages(concat("dev.ortserve.engine", internals))
                .should().dependOnClassesThat().resideInAnyPackage(internals)
                .because("the app (and engine.grammar, engine.rewrite) uses the engine through the types at its root; "
                        + "loading, KV, runner and sampling internals stay behind it")
                .check(classes);
    }

    private static String[] concat(String first, String[] rest) {
        String[] all = new String[rest.length + 1];
        all[0] = first;
        System.arraycopy(rest, 0, all, 1, rest.length);
        return all;
    }

    @Test
    void theHubImportsNothingOfOrtserve() {
        noClasses().that().resideInAPackage("dev.ortserve.hub..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.ortserve.api..", "dev.ortserve.service..", "dev.ortserve.engine..",
                        "dev.ortserve.embedding..", "dev.ortserve.store..", "dev.ortserve.config..")
                .check(classes);
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
