/*
 * boost_set_features.c — what a model stores of trees that split sets
 * (categorical_split sets): training splits a slot column's bins by a
 * mask; the model gets, instead of the slot columns, one derived feature of
 * kind set per distinct (column, set) the splits used (a 0/1 table by slot,
 * boost_cat.h) split at 0.5, so every scorer handles it as any derived
 * feature.  This file numbers those features and writes the splits' and
 * borders' side of it; boost.c's write_sections writes the sections.
 */
#include "boost_internal.h"

#include <string.h>

void
boost_model_features_free(boost_model_features *mf, gbml_env *env)
{
	for (int k = mf->n_kept - mf->inputs.n_inputs; mf->inputs.derived && k < mf->inputs.n_derived; k++)
		gbml_free(env, mf->inputs.derived[k].table);
	gbml_free(env, mf->inputs.derived);
	gbml_free(env, mf->to);
	gbml_free(env, mf->set_of);
	memset(mf, 0, sizeof(*mf));
}

/* Split s's set: its column and mask, hashed (FNV-1a). */
static uint64_t
set_hash(const forest_builder *F, size_t s)
{
	uint64_t	h = 0xcbf29ce484222325ULL ^ (uint64_t) F->feature[s];

	for (int i = 0; i < GBML_BOOST_SET_MASK_BYTES; i++)
		h = (h ^ F->set_mask[s * GBML_BOOST_SET_MASK_BYTES + i]) * 0x100000001b3ULL;
	return h;
}

static bool
same_set(const forest_builder *F, size_t a, size_t b)
{
	return F->feature[a] == F->feature[b] &&
		memcmp(F->set_mask + a * GBML_BOOST_SET_MASK_BYTES, F->set_mask + b * GBML_BOOST_SET_MASK_BYTES,
			   GBML_BOOST_SET_MASK_BYTES) == 0;
}

/* Gives each distinct set split a set number (mf->set_of), in the order the splits first use them. */
static int
number_sets(const trainer *T, boost_model_features *mf, size_t n_splits, size_t **first_out)
{
	const forest_builder *F = &T->forest;
	size_t		cap = 16;
	int64_t    *slot;
	size_t	   *first;

	while (cap < 2 * n_splits)
		cap *= 2;
	slot = gbml_alloc_array(T->env, cap, sizeof(int64_t));
	first = gbml_alloc_array(T->env, n_splits + 1, sizeof(size_t));
	if (slot == NULL || first == NULL)
	{
		gbml_free(T->env, slot);
		gbml_free(T->env, first);
		return T->env->error_code;
	}
	for (size_t i = 0; i < cap; i++)
		slot[i] = -1;
	for (size_t s = 0; s < n_splits; s++)
	{
		size_t		i;

		mf->set_of[s] = -1;
		if (F->border_index[s] != GBML_BOOST_SET_SPLIT)
			continue;
		for (i = set_hash(F, s) & (cap - 1); slot[i] >= 0 && !same_set(F, first[slot[i]], s); i = (i + 1) & (cap - 1))
			;
		if (slot[i] < 0)
		{
			slot[i] = mf->n_sets;
			first[mf->n_sets++] = s;
		}
		mf->set_of[s] = (int32_t) slot[i];
	}
	gbml_free(T->env, slot);
	*first_out = first;
	return GBML_OK;
}

/* mf for T's forest (boost_internal.h: boost_model_features). */
int
boost_plan_model_features(const trainer *T, boost_model_features *mf)
{
	const forest_builder *F = &T->forest;
	const gbml_boost_inputs *cat = &T->cat.model;
	size_t		n_splits = (size_t) F->n_trees * (size_t) F->splits;
	size_t	   *first = NULL;
	int			n_in = T->n_inputs,
				rc;

	memset(mf, 0, sizeof(*mf));
	mf->to = gbml_alloc_array(T->env, (size_t) T->n_features, sizeof(int32_t));
	mf->set_of = gbml_alloc_array(T->env, n_splits + 1, sizeof(int32_t));
	if (mf->to == NULL || mf->set_of == NULL)
		return T->env->error_code;
	mf->n_kept = n_in;
	for (int f = 0; f < T->n_features; f++)
		mf->to[f] = f < n_in ? f : T->is_set[f] ? -1 : mf->n_kept++;
	if ((rc = number_sets(T, mf, n_splits, &first)) != GBML_OK)
		return rc;
	mf->inputs = *cat;
	mf->inputs.n_derived = mf->n_kept - n_in + mf->n_sets;
	mf->inputs.derived = gbml_alloc0(T->env, sizeof(gbml_boost_derived) * ((size_t) mf->inputs.n_derived + 1));
	if (mf->inputs.derived == NULL)
	{
		gbml_free(T->env, first);
		return T->env->error_code;
	}
	for (int f = n_in; f < T->n_features; f++)
		if (mf->to[f] >= 0)
			mf->inputs.derived[mf->to[f] - n_in] = cat->derived[f - n_in];
	for (int k = 0; k < mf->n_sets; k++)
	{
		size_t		s = first[k];
		const gbml_boost_derived *slot = &cat->derived[F->feature[s] - n_in];
		gbml_boost_derived *e = &mf->inputs.derived[mf->n_kept - n_in + k];

		*e = *slot;
		e->kind = GBML_BOOST_CAT_SET;
		if ((e->table = gbml_alloc0(T->env, sizeof(float) * ((size_t) slot->n_categories + 2))) == NULL)
		{
			gbml_free(T->env, first);
			return T->env->error_code;
		}
		/* the slot column's bin is the slot, the unseen one (n + 1) included */
		for (int32_t c = 0; c <= slot->n_categories + 1; c++)
			e->table[c] = (float) gbml_boost_set_has(F->set_mask + s * GBML_BOOST_SET_MASK_BYTES, c);
	}
	gbml_free(T->env, first);
	return GBML_OK;
}

/* Split s's model feature: mf's numbering with set splits (a no-split node takes its tree's root's). */
uint32_t
boost_model_feature_of(const trainer *T, const boost_model_features *mf, size_t s, size_t root)
{
	const forest_builder *F = &T->forest;

	if (mf->to == NULL)
		return (uint32_t) F->feature[s];
	if (F->border_index[s] == GBML_BOOST_NO_SPLIT && F->node_splits)
		s = root;
	if (mf->set_of[s] >= 0)
		return (uint32_t) (mf->n_kept + mf->set_of[s]);
	return (uint32_t) mf->to[F->feature[s]];
}

/* The model features' borders ('BSTB'): the training's, renumbered by mf when the trees split sets. */
void
boost_write_borders(const trainer *T, const boost_model_features *mf, gbml_strbuf *sb)
{
	gbml_sb_u32(sb, (uint32_t) (mf->to ? mf->n_kept + mf->n_sets : T->n_features));
	for (int f = 0; f < T->n_features; f++)
	{
		if (mf->to && mf->to[f] < 0)
			continue;
		gbml_sb_u32(sb, (uint32_t) T->borders.count[f]);
		for (int j = 0; j < T->borders.count[f]; j++)
			gbml_sb_f32(sb, T->borders.values[T->borders.offset[f] + j]);
	}
	for (int k = 0; mf->to && k < mf->n_sets; k++)
	{
		gbml_sb_u32(sb, 1);
		gbml_sb_f32(sb, 0.5f);
	}
}
