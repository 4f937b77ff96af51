package dev.ortserve.service.structured;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.networknt.schema.JsonSchema;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SchemaValidatorsConfig;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.FinishReason;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.grammar.ByteDfa;
import dev.ortserve.engine.grammar.GrammarConstraint;
import dev.ortserve.engine.grammar.Nfa;
import dev.ortserve.engine.grammar.TokenVocabulary;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Property: on the project's random-weight models (whose free output is noise), every output
 * generated under a schema's grammar that finished with 'stop' parses and validates against that
 * schema, checked by an independent validator (networknt). Schemas are drawn from the supported
 * keyword set; the engine is the real one.
 */
class StructuredOutputProperties {

    static final ObjectMapper JSON = new ObjectMapper();
    static final JsonSchemaFactory FACTORY = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V202012);
    static final SchemaValidatorsConfig CONFIG = SchemaValidatorsConfig.builder().formatAssertionsEnabled(true).build();
    static final AtomicInteger IDS = new AtomicInteger();
    static final String[] PATTERNS = {"^[a-z]{1,8}$", "^[A-Z]{2}-\\d{3}$", "^(yes|no|maybe)$", "^\\w+@\\w+\\.com$", "ab+c"};
    static final String[] FORMATS = {"date", "date-time", "time", "uuid", "email", "ipv4"};

    static Path dir;
    static Engine tiny;
    static Engine demo;

    record Engine(LoadedModel model, ContinuousBatchingEngine engine, TokenVocabulary vocabulary) {
        static Engine start(ModelSize size, Path where) throws Exception {
            Path d = ModelGenerator.generate(size, 5, where);
            LoadedModel model = ModelLoader.load(d, EngineOptions.defaults());
            TokenVocabulary vocabulary = TokenVocabulary.load(d.resolve("tokenizer.json"), model.spec().vocabSize(), model.spec().eosIds());
            return new Engine(model, new ContinuousBatchingEngine(model, EngineOptions.defaults()), vocabulary);
        }

        void close() {
            engine.close();
            model.close();
        }
    }

    @BeforeContainer
    static void start() throws Exception {
        dir = Files.createTempDirectory("ortserve-structured");
        tiny = Engine.start(ModelSize.TINY, dir.resolve("tiny"));
        demo = Engine.start(ModelSize.DEMO, dir.resolve("demo"));
    }

    @AfterContainer
    static void stop() {
        if (tiny != null) tiny.close();
        if (demo != null) demo.close();
    }

    @Property(tries = 50, seed = "20261123")
    void tinyOutputsThatStopAreValid(@ForAll("schemas") JsonNode schema) throws Exception {
        check(tiny, schema);
    }

    @Property(tries = 50, seed = "20261124")
    void demoOutputsThatStopAreValid(@ForAll("schemas") JsonNode schema) throws Exception {
        check(demo, schema);
    }

    private static void check(Engine e, JsonNode schema) throws Exception {
        Nfa nfa = new Nfa();
        GrammarConstraint constraint = new GrammarConstraint(new ByteDfa(nfa, JsonSchemaGrammar.compile(nfa, schema)), e.vocabulary());
        int[] prompt = e.model().tokenizer().encode("Reply with JSON:");
        SamplingParams params = new SamplingParams(1.0, 1.0, 0, 0, 1, 0, 0, Map.of(), (long) IDS.get(), 160, 0, false,
                List.of(), List.of(), false, true, null).withConstraint(constraint);
        List<TokenEvent> events = e.engine().generate(new GenerationRequest("prop-" + IDS.incrementAndGet(), prompt, params))
                .collect().asList().await().atMost(Duration.ofSeconds(60));
        StringBuilder text = new StringBuilder();
        events.forEach(t -> text.append(t.textDelta()));
        FinishReason finish = events.get(events.size() - 1).finishReason();
        Statistics.label("finish").collect(finish);
        // most outputs must actually finish, or the property would say little
        Statistics.label("finish").coverage(c -> c.check(FinishReason.STOP).percentage(p -> p >= 50));
        if (finish != FinishReason.STOP) return; // cut by max_tokens: incomplete JSON is expected
        JsonNode output = JSON.readTree(text.toString());
        JsonSchema validator = FACTORY.getSchema(schema, CONFIG);
        Set<ValidationMessage> errors = validator.validate(output);
        assertEquals(Set.of(), errors, "output " + text + " for schema " + schema);
    }

    @Provide
    Arbitrary<JsonNode> schemas() {
        return Arbitraries.randomValue(r -> schema(r, 2));
    }

    static JsonNode schema(Random r, int depth) {
        int kind = r.nextInt(depth > 0 ? 12 : 8);
        ObjectNode s = JSON.createObjectNode();
        switch (kind) {
            case 0 -> {
                s.put("type", "integer");
                int lo = r.nextInt(200) - 100;
                if (r.nextBoolean()) s.put("minimum", lo);
                if (r.nextBoolean()) s.put("maximum", lo + r.nextInt(300));
            }
            case 1 -> {
                s.put("type", "number");
                int lo = r.nextInt(20) - 10;
                if (r.nextBoolean()) s.put("minimum", lo);
                if (r.nextBoolean()) s.put("maximum", lo + 1 + r.nextInt(20));
            }
            case 2 -> s.put("type", r.nextBoolean() ? "boolean" : "null");
            case 3 -> {
                s.put("type", "string");
                int min = r.nextInt(4);
                if (r.nextBoolean()) s.put("minLength", min);
                s.put("maxLength", min + r.nextInt(12));
            }
            case 4 -> {
                s.put("type", "string");
                s.put("pattern", PATTERNS[r.nextInt(PATTERNS.length)]);
            }
            case 5 -> {
                s.put("type", "string");
                s.put("format", FORMATS[r.nextInt(FORMATS.length)]);
            }
            case 6 -> {
                ArrayNode values = s.putArray("enum");
                values.add("red").add("green").add(r.nextInt(10));
                if (r.nextBoolean()) values.addNull();
            }
            case 7 -> {
                s.set("type", JSON.createArrayNode().add(r.nextBoolean() ? "integer" : "boolean").add("null"));
            }
            case 8, 9 -> {
                s.put("type", "object");
                ObjectNode props = s.putObject("properties");
                ArrayNode required = s.putArray("required");
                int n = 1 + r.nextInt(4);
                for (int i = 0; i < n; i++) {
                    String name = "p" + i + (r.nextBoolean() ? "_x" : "");
                    props.set(name, schema(r, depth - 1));
                    if (r.nextInt(3) > 0) required.add(name);
                }
                s.put("additionalProperties", false);
            }
            case 10 -> {
                s.put("type", "array");
                s.set("items", schema(r, depth - 1));
                int min = r.nextInt(3);
                s.put("minItems", min);
                s.put("maxItems", min + r.nextInt(3));
            }
            default -> {
                ArrayNode any = s.putArray("anyOf");
                any.add(schema(r, depth - 1));
                any.add(schema(r, depth - 1));
            }
        }
        return s;
    }
}
