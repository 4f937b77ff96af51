package dev.ortserve.service.error;

/** The request names a model this server does not serve (OpenAI answers this as an invalid request, not a missing object). */
public final class ModelNotFoundException extends ServiceException {

    public ModelNotFoundException(String model) {
        super("The model `" + model + "` does not exist.", "model", "model_not_found");
    }
}
