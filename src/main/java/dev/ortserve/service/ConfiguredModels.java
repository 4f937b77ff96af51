package dev.ortserve.service;

import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.ModelLoadException;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.List;

/**
 * The models this server is configured to serve, read once: ORTSERVE_MODELS_FILE's entries; else ORTSERVE_MODEL_PATH as
 * the one generative model (pinned), or, with neither, the demo model pinned and the agent model beside it; for
 * embeddings the file's embedding entries, else ORTSERVE_EMBEDDING_MODEL_PATH, else the bundled all-MiniLM-L6-v2.
 */
@ApplicationScoped
public class ConfiguredModels {

    @Inject
    OrtserveConfig config;

    @Inject
    ModelSources modelSources;

    private List<ModelEntry> file;

    private synchronized List<ModelEntry> file() {
        if (file == null) file = config.modelsFile().map(ModelsFile::read).orElse(List.of());
        return file;
    }

    /** The generative models, in the file's order. */
    public List<ModelEntry> generation() {
        List<ModelEntry> entries = entries();
        // ORTSERVE_LORA_MODULES: the one model's adapters (ORTSERVE_MODEL_PATH's, or the demo model's)
        List<ModelEntry.Adapter> lora = config.loraModules().map(ModelsFile::loraModules).orElse(List.of());
        if (lora.isEmpty()) return entries;
        if (config.modelsFile().isPresent()) {
            throw new ModelLoadException("ORTSERVE_LORA_MODULES and ORTSERVE_MODELS_FILE are both set: list the adapters under their model's"
                    + " 'adapters' in the models file instead");
        }
        for (ModelEntry.Adapter a : lora) {
            if (entries.stream().anyMatch(e -> e.names().contains(a.id()))) {
                throw new ModelLoadException("ORTSERVE_LORA_MODULES: the adapter name '" + a.id() + "' is already a model's name");
            }
        }
        List<ModelEntry> out = new java.util.ArrayList<>(entries);
        out.set(0, entries.get(0).withAdapters(lora));
        return out;
    }

    private List<ModelEntry> entries() {
        if (config.modelsFile().isPresent()) {
            if (config.modelPath().isPresent()) {
                throw new ModelLoadException("ORTSERVE_MODELS_FILE and ORTSERVE_MODEL_PATH are both set: list the model in the models file instead");
            }
            List<ModelEntry> generation = file().stream().filter(e -> e.kind() == ModelEntry.Kind.GENERATION).toList();
            if (generation.isEmpty()) throw new ModelLoadException("ORTSERVE_MODELS_FILE " + config.modelsFile().get() + " lists no generative model");
            return generation;
        }
        if (config.modelPath().isPresent()) {
            String spec = config.modelPath().get().toString();
            String id = config.modelName().orElseGet(() -> modelSources.defaultId(spec));
            return List.of(new ModelEntry(id, List.of(), spec, config.modelRevision().orElse(null), config.modelFile().orElse(null), true, null,
                    null, null, null, null, null, null, config.speculative().draftModelPath().orElse(null), ModelEntry.Kind.GENERATION));
        }
        String demo = config.modelName().orElse(GenerationModelHost.DEMO_MODEL_ID);
        ModelEntry pinned = new ModelEntry(demo, List.of(), ModelEntry.GENERATED + "demo", null, null, true, null, null, null, null, null, null, null,
                config.speculative().draftModelPath().orElse(null), ModelEntry.Kind.GENERATION);
        return demo.equals(GenerationModelHost.AGENT_MODEL_ID) ? List.of(pinned)
                : List.of(pinned, ModelEntry.generated(GenerationModelHost.AGENT_MODEL_ID, "agent", false));
    }

    /** The embedding models, each loaded at start. */
    public List<ModelEntry> embedding() {
        List<ModelEntry> listed = file().stream().filter(e -> e.kind() == ModelEntry.Kind.EMBEDDING).toList();
        if (!listed.isEmpty()) {
            if (config.embeddingModelPath().isPresent()) {
                throw new ModelLoadException("ORTSERVE_MODELS_FILE lists embedding models and ORTSERVE_EMBEDDING_MODEL_PATH is set: "
                        + "list the embedding model in the models file instead");
            }
            return listed;
        }
        if (config.embeddingModelPath().isPresent()) {
            String spec = config.embeddingModelPath().get().toString();
            return List.of(ModelEntry.embedding(config.embeddingModelName().orElseGet(() -> modelSources.defaultId(spec)), List.of(), spec, null,
                    config.embeddingModelFile().orElse(null)));
        }
        return List.of(ModelEntry.embedding(config.embeddingModelName().orElse(dev.ortserve.embedding.EmbeddingModel.BUNDLED_ID), List.of(),
                ModelEntry.BUNDLED, null, null));
    }
}
