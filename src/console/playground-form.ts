import type { PublicModel } from '../catalog/public-model.js';

/**
 * The playground's form, made from a model's published description (what GET /v1/models shows):
 * enums and integer enums as selects with the default chosen, booleans as checkboxes, image fields
 * as file inputs (or URL fields where the model takes HTTPS URLs only). And back: a submitted form
 * as the JSON body the API would have received.
 */

export interface FormField {
  name: string;
  label: string;
  kind: 'select' | 'checkbox' | 'file' | 'url';
  description: string;
  choices: Array<{ value: string; label: string; selected: boolean }>;
  checked: boolean;
  multiple: boolean;
}

export function formFields(model: PublicModel, values: Record<string, unknown> = {}): FormField[] {
  const fields: FormField[] = [];
  const imageKind = model.accepts_data_uris ? 'file' : 'url';
  if (model.max_images > 0) {
    fields.push({
      name: 'images',
      label: `Reference images (up to ${model.max_images})`,
      kind: imageKind,
      description: model.accepts_data_uris ? 'PNG, JPEG, WebP or GIF files.' : 'HTTPS URLs, one per line.',
      choices: [],
      checked: false,
      multiple: true,
    });
  }
  for (const [name, option] of Object.entries(model.options)) {
    const base = {
      name,
      label: name.replace(/_/g, ' '),
      description: option.description,
      choices: [],
      checked: false,
      multiple: false,
    };
    if (option.type === 'boolean') {
      fields.push({ ...base, kind: 'checkbox', checked: Boolean(values[name] ?? option.default) });
    } else if (option.type === 'image') {
      fields.push({ ...base, kind: imageKind });
    } else {
      const given = values[name];
      const chosen =
        typeof given === 'string' || typeof given === 'number' ? String(given) : String(option.default);
      fields.push({
        ...base,
        kind: 'select',
        choices: (option.values ?? []).map((v) => ({
          value: String(v),
          label: `${v}${option.unit ? ` ${option.unit}` : ''}${option.descriptions?.[String(v)] ? ` (${option.descriptions[String(v)]})` : ''}`,
          selected: String(v) === chosen,
        })),
      });
    }
  }
  return fields;
}

/** A submitted form: its text fields, and what each file input's images stand for in the body. */
export interface SubmittedForm {
  field(name: string): string | undefined;
  /** A file input's images as body values (none: empty). */
  images(name: string): string[];
}

/** The submitted form as the API's JSON body (model first, then prompt and the model's fields). */
export function bodyFromForm(model: PublicModel, form: SubmittedForm): Record<string, unknown> {
  const body: Record<string, unknown> = { model: model.id, prompt: form.field('prompt') ?? '' };
  for (const [name, option] of Object.entries(model.options)) {
    if (option.type === 'boolean') body[name] = form.field(name) === 'on';
    else if (option.type === 'image') {
      const [image] = imagesOf(model, form, name);
      if (image) body[name] = image;
    } else {
      const value = form.field(name);
      if (value !== undefined)
        body[name] = option.type === 'integer_enum' && /^\d+$/.test(value) ? Number(value) : value;
    }
  }
  if (model.max_images > 0) {
    const images = imagesOf(model, form, 'images');
    if (images.length > 0) body.images = images;
  }
  return body;
}

/** An image field's values: the uploaded files' stand-ins, or the URLs typed (one per line). */
function imagesOf(model: PublicModel, form: SubmittedForm, name: string): string[] {
  if (!model.accepts_data_uris) return (form.field(name) ?? '').split(/\s+/).filter((url) => url !== '');
  return form.images(name);
}

/** The names of a model's image fields: `images` and its image options. */
export function imageFieldNames(model: PublicModel): string[] {
  const options = Object.entries(model.options).filter(([, option]) => option.type === 'image');
  return [...(model.max_images > 0 ? ['images'] : []), ...options.map(([name]) => name)];
}
