package dev.ortserve.api.resource;

import dev.ortserve.api.generated.AdminApi;
import dev.ortserve.wire.model.ModelAdminRequest;
import dev.ortserve.wire.model.ModelAdminResponse;
import dev.ortserve.service.GenerationModelHost;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

/**
 * POST /models/load and /models/unload (llama.cpp router's endpoints), and vLLM's /v1/load_lora_adapter and
 * /v1/unload_lora_adapter, behind ORTSERVE_ADMIN_KEY (checked at the HTTP edge): {@link GenerationModelHost} loads or
 * unloads; the answer is the model's id and state, or the adapter's name and its model.
 */
public class AdminResource implements AdminApi {

    @Inject
    GenerationModelHost host;

    @Override
    public Uni<Response> loadModel(ModelAdminRequest req) {
        host.requireModel(req.getModel());
        return host.load(req.getModel()).map(served -> answer(served.id()));
    }

    @Override
    public Uni<Response> unloadModel(ModelAdminRequest req) {
        host.requireModel(req.getModel());
        return host.unload(req.getModel()).map(this::answer);
    }

    @Override
    public Uni<Response> loadLoraAdapter(dev.ortserve.wire.model.LoraAdapterLoadRequest req) {
        return host.loadAdapter(req.getLoraName(), req.getLoraPath(), req.getBaseModel())
                .map(parent -> Response.ok(new dev.ortserve.wire.model.LoraAdapterResponse().success(true).model(req.getLoraName()).parent(parent)).build());
    }

    @Override
    public Uni<Response> unloadLoraAdapter(dev.ortserve.wire.model.LoraAdapterUnloadRequest req) {
        return host.unloadAdapter(req.getLoraName())
                .map(parent -> Response.ok(new dev.ortserve.wire.model.LoraAdapterResponse().success(true).model(req.getLoraName()).parent(parent)).build());
    }

    private Response answer(String id) {
        return Response.ok(new ModelAdminResponse().success(true).model(id).status(ModelsResource.status(host.info(id)))).build();
    }
}
