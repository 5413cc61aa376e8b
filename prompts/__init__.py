"""VLM prompt templates, installed as simpact.prompts."""
